"""replay, explain and audit say which Kueue Configuration was in force, and use the one recorded in the log.

The log: the objects of scheduler scenario ``no-preemption-of-equal-priority`` (``team/first`` admitted,
``team/second`` of equal priority pending, no preemption candidate), then a ``ConfigRecorded`` with fairSharing,
then the scheduler's decisions under it — as a scheduler service writes them.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import anyio
import pytest
from clihelp import fold
from fixtures import fastyaml

from events import schema as ev
from events.filelog import FileLog
from kueue_es.cli import main
from kueue_es.scheduler import config_record, decide
from kueue_es.scheduler.config import load_config

SCENARIO = Path(__file__).resolve().parents[1] / "scheduler/scenarios/no-preemption-of-equal-priority.yaml"
HEAD = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
FAIR = {**HEAD, "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}}




def schedule(log_dir: Path, document: dict, writer: str = "replica-a") -> None:
    """What a scheduler service appends, with ``document`` as its configuration, until it has nothing to say."""
    state = fold(log_dir)

    async def run() -> None:
        log = FileLog.open(log_dir, fsync="never")
        try:
            while batch := (config_record.pending(state, document, writer=writer, source="kueue.yaml")
                            or decide(state, load_config(document))):
                for off, e in zip(await log.append(batch), batch, strict=True):
                    state.apply(ev.Record(off, e))
        finally:
            await log.close()

    anyio.run(run)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    objects = tmp_path / "objects.yaml"
    objects.write_text(fastyaml.safe_dump_all(fastyaml.safe_load(SCENARIO.read_text())["objects"]))
    log_dir = tmp_path / "log"
    assert main(["import", "-f", str(objects), "--log", str(log_dir)]) == 0
    return log_dir


def output(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


def test_replay_explain_and_audit_show_and_use_the_configuration_in_force(
        log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = fold(log_dir).offset
    schedule(log_dir, FAIR)
    at = before + 1
    state = fold(log_dir)
    assert state.config_offset == at and state.config.document == FAIR and state.offset > at
    fp = config_record.fingerprint(FAIR)
    line = (f"recorded at offset {at} ({fp}, writer replica-a, source kueue.yaml): "
            "fairSharing (LessThanOrEqualToFinalShare)")

    code, out = output(capsys, "replay", "--log", str(log_dir))
    assert code == 0 and out.splitlines()[1] == f"Configuration: {line}"
    code, out = output(capsys, "replay", "--log", str(log_dir), "--to", str(before))
    assert code == 0 and out.splitlines()[1] == "Configuration: none recorded in the log (Kueue's defaults)"
    code, out = output(capsys, "replay", "--log", str(log_dir), "-o", "yaml")
    c = fastyaml.safe_load(out)["configuration"]
    assert c == {"offset": at, "fingerprint": fp, "summary": "fairSharing (LessThanOrEqualToFinalShare)",
                 "writer": "replica-a", "source": "kueue.yaml", "document": FAIR}

    # explain dry-runs the next attempt under the recorded configuration (Fair Sharing preemption) ...
    code, out = output(capsys, "explain", "team/second", "--log", str(log_dir), "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["preemption"]["policies"]["fairSharing"] is True
    assert data["configuration"]["offset"] == at and "document" not in data["configuration"]
    code, out = output(capsys, "explain", "team/second", "--log", str(log_dir))
    assert out.splitlines()[-1] == f"Configuration: {line}" and "Fair Sharing" in out
    # ... unless --config says otherwise; before the record, Kueue's defaults were in force
    defaults = tmp_path / "defaults.yaml"
    defaults.write_text(fastyaml.safe_dump(HEAD))
    code, out = output(capsys, "explain", "team/second", "--log", str(log_dir), "--config", str(defaults), "-o", "json")
    data = json.loads(out)
    assert data["preemption"]["policies"]["fairSharing"] is False
    assert data["configuration"]["override"] == str(defaults) and data["configuration"]["overrides"]["offset"] == at
    code, out = output(capsys, "explain", "team/second", "--log", str(log_dir), "--to", str(before), "-o", "json")
    data = json.loads(out)
    assert data["preemption"]["policies"]["fairSharing"] is False
    assert data["configuration"] == {"summary": "Kueue's defaults (none recorded in the log)"}

    # audit: each decision names the configuration it was made under, listed once
    code, out = output(capsys, "audit", "--log", str(log_dir), "team/second")
    assert code == 0 and f"(configuration at offset {at})" in out
    assert out.splitlines()[-1] == f"Configuration {line}"
    code, out = output(capsys, "audit", "--log", str(log_dir), "team/second", "-o", "json")
    data = json.loads(out)
    assert [c["offset"] for c in data["configurations"]] == [at]
    decided = [s for s in data["steps"] if "cycle" in s]
    assert decided and all(s["config"] == at for s in decided)
    assert all("config" not in s for s in data["steps"] if "cycle" not in s)


def test_a_later_configuration_is_in_force_from_its_offset_on(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schedule(log_dir, HEAD)
    first = fold(log_dir).config_offset
    schedule(log_dir, FAIR, writer="replica-b")  # a changed configuration: recorded, and the parked head retried
    state = fold(log_dir)
    assert state.config_offset > first and state.offset > state.config_offset, "decided again under it"
    code, out = output(capsys, "replay", "--log", str(log_dir), "--verify")
    assert code == 0, out
    assert f"configuration: recorded at offset {first} (" in out and f"recorded at offset {state.config_offset} (" in out
    code, out = output(capsys, "audit", "--log", str(log_dir), "team/second", "-o", "json")
    data = json.loads(out)
    assert {s["config"] for s in data["steps"] if "cycle" in s} == {first, state.config_offset}
    assert [c["writer"] for c in data["configurations"]] == ["replica-a", "replica-b"]


@pytest.mark.parametrize("document, error", [
    ({**HEAD, "waitForPodsReady": {"timeout": "soon"}}, "field `waitForPodsReady.timeout`: invalid duration 'soon'"),
    ({**HEAD, "fairSharing": {"preemptionStrategies": "all"}}, "field `fairSharing.preemptionStrategies`"),
    ({"kind": "ClusterQueue"}, "not a Kueue Configuration"),
])
def test_an_invalid_recorded_configuration_is_an_error_naming_its_offset(
        log_dir: Path, capsys: pytest.CaptureFixture[str], document: dict, error: str) -> None:
    at = fold(log_dir).offset + 1

    async def append() -> None:
        log = FileLog.open(log_dir, fsync="never")
        try:
            await log.append([ev.ConfigRecorded(time=0, document=document, writer="someone")])
        finally:
            await log.close()

    anyio.run(append)
    schedule(log_dir, HEAD)  # a scheduler with a valid one records it after: decisions follow
    where = f"log offset {at} (ConfigRecorded)"
    for args in (["replay", "--verify"], ["replay", "--to", str(at)], ["explain", "team/second", "--to", str(at)]):
        capsys.readouterr()
        assert main([*args, "--log", str(log_dir)]) == 2, args
        err = capsys.readouterr().err
        assert where in err and error in err, (args, err)
    # The audit reports the log's history as it is; --config sets the recorded one aside.
    code, out = output(capsys, "audit", "--log", str(log_dir), "-o", "json")
    assert code == 0 and not [c for c in json.loads(out)["configurations"] if c["offset"] == at]
    defaults = log_dir.parent / "defaults.yaml"
    defaults.write_text(fastyaml.safe_dump(HEAD))
    code, out = output(capsys, "replay", "--log", str(log_dir), "--verify", "--config", str(defaults), "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["verified"] and data["configurations"][0]["offset"] == at
    assert data["configurations"][0]["summary"].startswith(f"not a valid Configuration: {where}")


AFS = {**HEAD, "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}
AFS_WARNING = "the override folds only the entries after each LocalQueue's last checkpoint"


@pytest.mark.parametrize("override", [
    {**HEAD, "admissionFairSharing": {"usageHalfLifeTime": "20m", "usageSamplingInterval": "1m"}},
    {**HEAD, "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "2m"}},
])
def test_an_override_with_another_admission_fair_sharing_half_life_or_interval_warns(
        log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], override: dict) -> None:
    """The history was compacted under the recorded half-life and interval: another one is not a full refold.
    explain, pending and replay --verify say so on stderr, in one line; the same parameters say nothing."""
    schedule(log_dir, AFS)
    other, same = tmp_path / "other.yaml", tmp_path / "same.yaml"
    other.write_text(fastyaml.safe_dump(override))
    same.write_text(fastyaml.safe_dump(AFS))
    for command in (["explain", "team/second", "--log", str(log_dir)],
                    ["pending", "--cluster-queue", "cq", "--log", str(log_dir)],
                    ["replay", "--verify", "--log", str(log_dir)]):
        capsys.readouterr()
        main([*command, "--config", str(other)])
        err = capsys.readouterr().err
        assert [line for line in err.splitlines() if AFS_WARNING in line] != [], command
        assert len([line for line in err.splitlines() if "Admission Fair Sharing" in line]) == 1, command
        main([*command, "--config", str(same)])
        assert "Admission Fair Sharing" not in capsys.readouterr().err, command
    assert "LocalQueue's last checkpoint" in " ".join(main_help("explain").split())


def test_an_override_turning_admission_fair_sharing_on_over_a_log_without_a_configuration_warns(
        log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With no Configuration recorded no history is kept (what reads the log reads Kueue's defaults): an override
    turning Admission Fair Sharing on reads every usage as 0, and says so."""
    afs = tmp_path / "afs.yaml"
    afs.write_text(fastyaml.safe_dump(AFS))
    for command in (["explain", "team/second", "--log", str(log_dir)],
                    ["pending", "--cluster-queue", "cq", "--log", str(log_dir)],
                    ["replay", "--verify", "--log", str(log_dir)]):
        capsys.readouterr()
        main([*command, "--config", str(afs)])
        err = capsys.readouterr().err
        assert "the log records no configuration: no history was kept" in " ".join(err.split()), command


def main_help(command: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        main([command, "--help"])
    return buf.getvalue()


OLDER = {**HEAD, "managedJobsNamespaceSelector": {}, "multiKueue": {"origin": "not a label!"},
         "tls": {"minVersion": "VersionTLS13", "cipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]},
         "visibilityServer": {"bindPort": 0}}
"""A Configuration an older kueue-es took and recorded, which rules taken up since refuse (as Kueue refuses it)."""


def test_a_recorded_configuration_newer_rules_refuse_still_replays(
        log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The decisions after it were taken under it: replay (verified), explain and audit read it as they did."""
    state = fold(log_dir)
    recorded = load_config(OLDER, strict=False)

    async def run() -> None:  # what an older scheduler service appended
        log = FileLog.open(log_dir, fsync="never")
        try:
            while batch := (config_record.pending(state, OLDER, writer="older", source="kueue.yaml")
                            or decide(state, recorded)):
                for off, e in zip(await log.append(batch), batch, strict=True):
                    state.apply(ev.Record(off, e))
        finally:
            await log.close()

    anyio.run(run)
    cfg = tmp_path / "kueue.yaml"
    cfg.write_text(fastyaml.safe_dump(OLDER))
    capsys.readouterr()
    assert main(["replay", "--verify", "--log", str(log_dir), "--config", str(cfg)]) == 2, "a file with it is refused"
    err = capsys.readouterr().err  # every rule it breaks, in Kueue's order, on one line
    assert f'{cfg}: [field `multiKueue.origin`: Invalid value: "not a label!"' in err and err.count("\n") == 1
    assert err.index("`managedJobsNamespaceSelector`") < err.index("`tls.cipherSuites`") < err.index(
        "`visibilityServer.bindPort`: Invalid value: 0: must be a valid port number (1-65535)]")
    for args in (["replay", "--verify"], ["explain", "team/second"], ["audit", "team/second"]):
        code, out = output(capsys, *args, "--log", str(log_dir))
        assert code == 0, (args, out)
