"""Hostile input to every command that reads a file or writes beside a log: one line naming the file (and where in
it), exit code 2, no traceback, and the log left as it was."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import FIXTURES, kueue_es, log_size, one_line_error

from events.filelog import HEADER
from kueue_es.cli import main

CLUSTER = FIXTURES / "cluster.yaml"
NOT_UTF8 = b"apiVersion: v1\nkind: Namespace\nmetadata: {name: caf\xe9}\n"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    assert kueue_es("import", "-f", CLUSTER, "--log", path).code == 0
    return path


@pytest.mark.parametrize("args", [
    ["import", "-f", "{bad}", "--log", "{log}"],
    ["schedule", "-f", "{bad}"],
    ["schedule", "-f", str(CLUSTER), "--config", "{bad}"],
    ["explain", "-f", "{bad}", "team-a/train-1"],
    ["pending", "-f", "{bad}", "--cluster-queue", "cq-a"],
    ["replay", "--log", "{log}", "--verify", "--config", "{bad}"],
    ["simulate", "{bad}", "--log", "{log}-sim"],
    ["run", "--log", "{log}", "--config", "{bad}"],
    ["run", "--log", "{log}", "--kueue-config", "{bad}"],
])
def test_a_file_that_is_not_utf8_is_named_with_its_line_and_changes_nothing(log: Path, tmp_path: Path,
                                                                             args: list[str]) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(NOT_UTF8)
    before = log_size(log)
    r = kueue_es(*(a.format(bad=bad, log=log) for a in args))
    assert r.code == 2
    assert one_line_error(r) == f"kueue-es: error: {bad}: line 3: not UTF-8 text (byte 0xe9 at byte 51)"
    assert log_size(log) == before
    assert not Path(f"{log}-sim").exists()


def test_stdin_that_is_not_utf8_is_refused_too(log: Path) -> None:
    before = log_size(log)
    proc = subprocess.run([sys.executable, "-m", "kueue_es", "import", "-f", "-", "--log", str(log)],
                          input=NOT_UTF8, capture_output=True, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err == "kueue-es: error: <stdin>: line 3: not UTF-8 text (byte 0xe9 at byte 51)\n"
    assert log_size(log) == before


@pytest.mark.parametrize("inside", ["00000000000000000099.seg", "checkpoints/00000000000000000005.ckpt", "state.snap",
                                    "."])
def test_save_snapshot_writes_nothing_inside_the_log_directory(log: Path, tmp_path: Path, inside: str) -> None:
    """A snapshot saved as a segment's name would be read as the log's next segment, and every later read would
    fail: nothing is written into the log's directory."""
    (log / "checkpoints").mkdir(exist_ok=True)
    before = sorted(p.relative_to(log) for p in log.rglob("*"))
    r = kueue_es("replay", "--log", log, "--save-snapshot", log / inside)
    assert r.code == 2
    assert f"--save-snapshot {log / inside}: inside the log directory {log}; not written there" in one_line_error(r)
    assert sorted(p.relative_to(log) for p in log.rglob("*")) == before
    assert kueue_es("log", "verify", "--log", log).code == 0


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


@pytest.mark.parametrize("command", [
    ["replay", "--log", "L", "--at"], ["metrics", "--log", "L", "--at"], ["audit", "--log", "L", "--since"],
    ["audit", "--log", "L", "--until"], ["pending", "--log", "L", "--cluster-queue", "cq", "--at"],
    ["explain", "--log", "L", "ns/w", "--at"], ["explain", "-f", "F", "ns/w", "--now"], ["schedule", "-f", "F", "--now"],
    ["import", "-f", "F", "--log", "L", "--time"],
])
@pytest.mark.parametrize("text, hint", [
    ("2024-05-01T12:00:00", "no time zone: add Z for UTC or an offset such as +02:00"),
    ("2024-05-01 12:00", "no time zone: add Z for UTC or an offset such as +02:00"),
    ("2024-05-01", "example: 2024-05-01T12:00:00Z"),
    ("20240501T120000Z", "example: 2024-05-01T12:00:00Z"),
    ("2024-05-01T12:00:00+0200", "example: 2024-05-01T12:00:00Z"),
])
def test_a_time_flag_takes_only_an_rfc3339_time_with_its_zone(command: list[str], text: str, hint: str) -> None:
    """A time without a zone was taken as UTC, off by the user's own offset; a date alone or another ISO 8601
    form was taken too. Refused as misuse, before anything is read or written."""
    code, err = _run([*command, text])
    assert code == 2
    flag = command[-1]
    assert f"argument {flag}: not an RFC 3339 time: {text!r} ({hint})" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("text", ["2024-05-01T12:00:00Z", " 2024-05-01T12:00:00.5+02:00 ", "2024-05-01T12:00:00-07:00"])
def test_rfc3339_times_with_a_zone_are_taken(tmp_path: Path, text: str) -> None:
    code, err = _run(["replay", "--log", str(tmp_path), "--at", text])
    assert code == 0, err


def test_an_object_given_twice_in_one_import_is_refused_naming_both_documents(log: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.yaml"
    first.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-z}\n---\n"
                     "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n"
                     "metadata: {name: lq, namespace: team-z}\nspec: {clusterQueue: cq-a}\n")
    second = tmp_path / "second.yaml"
    second.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n"
                      "metadata: {name: lq, namespace: team-z}\nspec: {clusterQueue: cq-b}\n")
    before = log_size(log)
    for files in ([first, second], [second, second]):
        r = kueue_es("import", *(a for f in files for a in ("-f", f)), "--log", log)
        assert r.code == 2
        assert one_line_error(r) == (f"kueue-es: error: {files[1]}: document 1 (LocalQueue lq): LocalQueue team-z/lq "
                                     f"is given more than once (first in {files[0]}: document {2 if files[0] == first else 1})")
        assert log_size(log) == before
    assert kueue_es("import", "-f", first, "--log", log).code == 0
    assert kueue_es("import", "-f", second, "--log", log).code == 0, "one import after another updates it"


@pytest.mark.parametrize("stamp, zone", [("2024-05-01", ""), ("2024-05-01T12:00:00", " (no time zone)"),
                                         ("2024-05-01 12:00:00Z", ""), ("20240501T120000Z", "")])
def test_an_object_time_that_is_not_rfc3339_with_a_zone_is_refused(log: Path, tmp_path: Path, stamp: str,
                                                                   zone: str) -> None:
    """As the apiserver refuses it: a creationTimestamp without its zone was imported as UTC."""
    bad = tmp_path / "ns.yaml"
    bad.write_text(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: team-z, creationTimestamp: '{stamp}'}}\n")
    before = log_size(log)
    r = kueue_es("import", "-f", bad, "--log", log)
    assert r.code == 2
    assert one_line_error(r) == (f"kueue-es: error: {bad}: document 1 (Namespace team-z): field "
                                 f"`metadata.creationTimestamp`: not an RFC 3339 time{zone}: {stamp!r}")
    assert log_size(log) == before


@pytest.mark.parametrize("args, expected", [
    (["--namespace", "Team A"], "argument --namespace: not a namespace name: 'Team A' (expected a DNS label"),
    (["--namespace", ""], "argument --namespace: not a namespace name: ''"),
    (["--namespace", "a" * 64], "argument --namespace: not a namespace name"),
    (["--image", ""], "argument --image: not a container image: ''"),
    (["--image", "kueue-es :1"], "argument --image: not a container image: 'kueue-es :1'"),
])
def test_manifests_refuse_a_namespace_or_image_the_apiserver_would(args: list[str], expected: str) -> None:
    """Printed as given, they made manifests ``kubectl apply`` refuses (an empty namespace fell back to the default)."""
    code, err = _run(["manifests", *args])
    assert code == 2 and expected in err and len(err.splitlines()) == 1


def test_import_says_when_it_cuts_a_torn_tail(log: Path, tmp_path: Path) -> None:
    """The writer cuts the start of an append a crash interrupted before it appends: said, not done silently."""
    seg = log / "00000000000000000000.seg"
    events, size = log_size(log)
    with seg.open("ab") as f:
        f.write(HEADER.pack(1000, 0, events, 1) + b"half a frame")
    ns = tmp_path / "ns.yaml"
    ns.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-z}\n")
    r = kueue_es("import", "-f", ns, "--log", log)
    assert r.code == 0
    assert r.err == (f"kueue-es: warning: --log {log}: cut off a torn tail of {HEADER.size + 12} bytes (the start of "
                     "an append a crash interrupted, never acknowledged)\n")
    assert log_size(log)[0] == events + 1


DEEP = "[" * 50_000 + "]" * 50_000


@pytest.mark.parametrize("args, text, expected", [
    (["import", "-f", "{bad}", "--log", "{log}"], f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: x}}\nspec: {DEEP}\n",
     "{bad}: document 1: line 4: nested more than 1000 levels deep"),  # crashed the process (libyaml's C stack)
    (["import", "-f", "{bad}", "--log", "{log}"],
     "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\nspec: " + "[" * 1500 + "]" * 1500 + "\n",
     "{bad}: document 1: line 4: nested more than 1000 levels deep"),  # libyaml's own limit since PyYAML 6.0.4
    (["import", "-f", "{bad}", "--log", "{log}"], "apiVersion: v1\nkind: Namespace\nmetadata: {name: x, labels: &a {x: *a}}\n",
     "{bad}: document 1: nested too deeply (or an alias holds itself)"),
    (["schedule", "-f", str(CLUSTER), "--config", "{bad}"], f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nx: {DEEP}\n",
     "{bad}: document 1: line 3: nested more than 1000 levels deep"),
    (["simulate", "{bad}", "--log", "{log}-sim"], f"cohorts: {DEEP}\n", "{bad}: nested too deeply (or an alias holds itself)"),
    (["run", "--log", "{log}", "--config", "{bad}"], f"kafka: {DEEP}\n", "{bad}: nested too deeply (or an alias holds itself)"),
])
def test_yaml_nested_too_deeply_is_refused_in_one_line(log: Path, tmp_path: Path, args: list[str], text: str,
                                                       expected: str) -> None:
    bad = tmp_path / "deep.yaml"
    bad.write_text(text)
    before = log_size(log)
    r = kueue_es(*(a.format(bad=bad, log=log) for a in args))
    assert r.code == 2, r.err[-500:]
    assert one_line_error(r) == "kueue-es: error: " + expected.format(bad=bad)
    assert log_size(log) == before
    assert not Path(f"{log}-sim").exists()


def test_a_large_ordinary_file_is_not_refused_for_its_depth(tmp_path: Path) -> None:
    """Many documents mean many ``-`` and ``[``: the walk over the events runs, and finds them shallow."""
    many = tmp_path / "many.yaml"
    many.write_text("".join(f"---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: team-{i}, labels: {{a: b}}}}\n"
                            for i in range(6000)))
    r = kueue_es("import", "-f", many, "--log", tmp_path / "log", "--time", "2024-05-01T00:00:00Z")
    assert r.code == 0, r.err
    assert log_size(tmp_path / "log")[0] == 6000


@pytest.mark.parametrize("command", [["explain", "--log", "{log}", "team-a/train-1"],
                                     ["pending", "--log", "{log}", "--cluster-queue", "cq-a"]])
def test_a_point_outside_the_log_is_named_by_explain_and_pending_too(log: Path, command: list[str]) -> None:
    """As replay and metrics say it: --to past the end, --at before the first event."""
    argv = [a.format(log=log) for a in command]
    code, err = _run([*argv, "--to", "500"])
    assert code == 0
    assert err == "kueue-es: warning: --to 500 is past the end of the log; folded up to offset 10\n"
    code, err = _run([*argv, "--at", "1960-01-01T00:00:00Z"])
    assert err.splitlines()[0] == ("kueue-es: warning: --at 1960-01-01T00:00:00.000Z is before the log's first event; "
                                   "the state is empty")
    if command[0] == "pending":
        assert code == 1 and err.splitlines()[1] == ('kueue-es: error: (NotFound) ClusterQueue "cq-a" not found in the '
                                                     "log (no event folded)")


@pytest.mark.parametrize("argv", [
    ["import", "-f", "F", "--log", ""], ["import", "-f", "", "--log", "L"], ["replay", "--log", ""],
    ["replay", "--log", "L", "--snapshot", ""], ["replay", "--log", "L", "--save-snapshot", ""],
    ["replay", "--log", "L", "--verify", "--config", ""], ["audit", "--log", "", "ns/w"], ["metrics", "--log", ""],
    ["log", "inspect", "--log", ""], ["log", "verify", "--log", ""], ["schedule", "-f", ""],
    ["schedule", "-f", "F", "--config", ""], ["explain", "--log", "", "ns/w"], ["explain", "-f", "F", "ns/w", "--config", ""],
    ["pending", "--log", "", "--cluster-queue", "cq"], ["pending", "-f", "", "--cluster-queue", "cq"],
    ["simulate", ""], ["simulate", "demo", "--log", ""], ["simulate", "demo", "--plot", ""],
    ["simulate", "demo", "--config", ""], ["demo", "--log", ""], ["run", "--log", ""], ["run", "--config", ""],
    ["run", "--kueue-config", ""], ["run", "--kube", "--kubeconfig", ""],
])
def test_an_empty_path_is_misuse(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--log "$LOG"`` with the variable unset imported into the current directory; ``--config ""`` was the flag
    left out, Kueue's defaults in force."""
    monkeypatch.chdir(tmp_path)
    code, err = _run(argv)
    assert code == 2
    assert ": empty path" in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


SCENARIO = """\
cohorts:
- className: c
  queuesSets:
  - className: q
    nominalQuota: 10
    borrowingLimit: 0
    reclaimWithinCohort: Never
    withinClusterQueue: Never
    workloadsSets:
    - count: 2
      creationIntervalMs: {interval}
      workloads:
      - {{className: w, runtimeMs: {runtime}, priority: {priority}, request: 1}}
"""


@pytest.mark.parametrize("flags, values, expected", [
    (["--stop-delay-ms", str(10**23)], {}, f"argument --stop-delay-ms: not a delay: '{10**23}' (expected an integer >= 0 "
                                           "and <= 86400000)"),
    (["--jitter-ms", "86400001"], {}, "argument --jitter-ms: not a delay: '86400001'"),
    ([], {"runtime": 10**23}, f"workloads[0].runtimeMs`: must be <= 31536000000, got {10**23}"),
    ([], {"interval": 10**23}, "workloadsSets[0].creationIntervalMs`: must be <= 31536000000"),
    ([], {"priority": 2**31}, "workloads[0].priority`: must be <= 2147483647, got 2147483648"),
])
def test_simulate_refuses_times_beyond_the_log_and_leaves_no_log(tmp_path: Path, flags: list[str],
                                                                values: dict[str, int], expected: str) -> None:
    """They overflowed the log's 64-bit times mid-run: an OverflowError traceback, and a partial log left behind."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO.format(**{"interval": 10, "runtime": 100, "priority": 1, **values}))
    r = kueue_es("simulate", scenario, "--log", tmp_path / "sim", *flags)
    assert r.code == 2
    assert expected in one_line_error(r)
    assert not (tmp_path / "sim").exists()
    scenario.write_text(SCENARIO.format(interval=10, runtime=100, priority=1))
    assert kueue_es("simulate", scenario, "--log", tmp_path / "sim").code == 0


@pytest.mark.parametrize("flags, expected", [
    (["--verify", "--to", "3"], "--to does not go with --verify, which re-runs every decision of the whole log"),
    (["--verify", "--at", "2024-05-01T00:00:00Z"], "--at does not go with --verify"),
    (["--verify", "--snapshot", "{tmp}/s.snap"], "--snapshot does not go with --verify"),
    (["--verify", "--save-snapshot", "{tmp}/s.snap"], "--save-snapshot does not go with --verify"),
    (["--verify", "--quarantine"], "--quarantine does not go with --verify"),
    (["--config", "{tmp}/any.yaml"], "--config goes with --verify (a replay shows the Configuration recorded in the log)"),
])
def test_replay_refuses_a_flag_its_mode_would_drop(log: Path, tmp_path: Path, flags: list[str], expected: str) -> None:
    """--verify checked the whole log whatever --to said, and wrote no --save-snapshot; a replay without --verify
    ignored --config, however malformed."""
    code, err = _run(["replay", "--log", str(log), *(f.format(tmp=tmp_path) for f in flags)])
    assert code == 2
    assert err.startswith(f"kueue-es: error: {expected}") and len(err.splitlines()) == 1
    assert list(tmp_path.glob("*.snap")) == []


@pytest.mark.parametrize("flag", [["--health-port", "9"], ["--kubeconfig", "kube.conf"]])
def test_run_refuses_a_kubernetes_flag_without_the_connector(flag: list[str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --kube (or kube.enabled in the settings) nothing would use it: refused, not silently ignored."""
    from kueue_es import service

    ran: list[object] = []
    monkeypatch.setattr(service, "run", lambda settings: ran.append(settings) or 0)
    for name in [n for n in os.environ if n.startswith("KUEUE_ES_")]:
        monkeypatch.delenv(name)
    log = str(tmp_path / "log")
    code, err = _run(["run", "--log", log, *flag])
    assert (code, ran) == (2, [])
    assert err == (f"kueue-es: error: {flag[0]} goes with --kube (or kube.enabled in the settings); without it "
                   "there is no Kubernetes connector to use it\n")
    settings = tmp_path / "settings.yaml"
    settings.write_text("kube:\n  enabled: true\n")
    assert _run(["run", "--log", log, "--kube", *flag]) == (0, "")
    assert _run(["run", "--log", log, "--config", str(settings), *flag]) == (0, "")
    assert len(ran) == 2 and all(s.kube.enabled for s in ran)  # type: ignore[attr-defined]
