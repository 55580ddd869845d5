"""``kueue-es audit`` shows a preemption the connector rejected and the fold took back as a step that did not
happen: the ``Preempted`` step and its ``Rejected`` step are marked ``takenBack``, with the fold brought in
for that rejection only (:meth:`projections.audit.AuditTrail.needs_state`). One followed by another event of
the workload before the rejection stays folded, and is not marked."""

from __future__ import annotations

import json
from pathlib import Path

from clihelp import append, kueue_es
from fixtures import eventgen as g

from events import schema as ev

LOW = g.workload("team", "low", queue="lq")
BASE = {"key": LOW.key, "uid": LOW.metadata.uid}


def _events(between: list[ev.AnyEvent]) -> list[ev.AnyEvent]:
    """``team/low`` admitted (offsets 0-5), preempted (6), ``between``, then the preemption rejected."""
    events: list[ev.AnyEvent] = [
        g.upsert(g.flavor("f0"), g.T0), g.upsert(g.cluster_queue("cq"), g.T0),
        g.upsert(g.local_queue("team", "lq", "cq"), g.T0), g.upsert(LOW, g.T0),
        ev.QuotaReserved(admission=g.admission("cq", "f0", 1000), time=g.T0 + 1000, cycle=1, input=3, **BASE),
        ev.WorkloadAdmitted(time=g.T0 + 1000, cycle=1, input=3, **BASE),
        ev.WorkloadPreempted(reason="InClusterQueue", message="Preempted to accommodate team/high",
                             preemptor="team/high", time=g.T0 + 2000, cycle=2, input=5, **BASE),
        *between,
    ]
    events.append(ev.DecisionRejected(time=g.T0 + 3000, decision=6, reason="Forbidden", message="denied",
                                      **BASE))
    return events


def _steps(path: Path) -> dict[str, dict]:
    r = kueue_es("audit", "--log", path, "team/low", "-o", "json")
    assert r.code == 0, r.err
    return {s["step"]: s for s in json.loads(r.out)["steps"]}


def test_a_rejected_preemption_taken_back_is_shown_as_not_having_happened(tmp_path: Path) -> None:
    path = tmp_path / "log"
    append(path, _events([]))
    steps = _steps(path)
    assert steps["Preempted"]["takenBack"] is True
    assert (steps["Rejected"]["decision"], steps["Rejected"]["takenBack"]) == (6, True)
    table = kueue_es("audit", "--log", path, "team/low").out
    assert "did not happen: rejected and taken back" in table
    assert "taken back: the workload is as it was before that decision" in table


def test_a_rejected_preemption_the_fold_keeps_is_not_marked(tmp_path: Path) -> None:
    path = tmp_path / "log"
    append(path, _events([ev.PodsReadyChanged(time=g.T0 + 2500, key=LOW.key, ready=True, reason="Started")]))
    steps = _steps(path)
    assert "takenBack" not in steps["Preempted"] and "takenBack" not in steps["Rejected"]
