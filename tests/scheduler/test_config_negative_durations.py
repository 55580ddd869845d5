"""A negative duration Kueue's validation refuses is refused in its words (``field.Invalid`` with apimachinery's
``must be greater than or equal to 0``), the value shown as Go's ``time.Duration.String`` shows it; where Kueue
hands the message a string (``afterDeactivatedByKueue``), quoted as Go quotes one."""

from __future__ import annotations

import pytest

from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from projections.go_duration import format_ns, parse_ns

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


@pytest.mark.parametrize(("ns", "text"), [  # as Go's time package writes them
    (0, "0s"), (1, "1ns"), (1100, "1.1\u00b5s"), (2_200_000, "2.2ms"), (3_300_000_000, "3.3s"),
    (245_000_000_000, "4m5s"), (245_001_000_000, "4m5.001s"), (18_367_001_000_000, "5h6m7.001s"),
    (480_000_000_001, "8m0.000000001s"), (3_600_000_000_000, "1h0m0s"), (-60_000_000_000, "-1m0s"),
    (-1, "-1ns"), ((1 << 63) - 1, "2562047h47m16.854775807s"), (-(1 << 63), "-2562047h47m16.854775808s"),
])
def test_a_duration_is_written_as_go_writes_it(ns: int, text: str) -> None:
    assert format_ns(ns) == text
    assert parse_ns(text) == ns


@pytest.mark.parametrize(("stanza", "error"), [
    ({"waitForPodsReady": {"timeout": "-5m"}}, "field `waitForPodsReady.timeout`: Invalid value: -5m0s"),
    ({"waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "-90s"}},
     "field `waitForPodsReady.recoveryTimeout`: Invalid value: -1m30s"),
    ({"multiKueue": {"gcInterval": "-1h"}}, "field `multiKueue.gcInterval`: Invalid value: -1h0m0s"),
    ({"multiKueue": {"workerLostTimeout": "-1.5ms"}}, "field `multiKueue.workerLostTimeout`: Invalid value: -1.5ms"),
    ({"objectRetentionPolicies": {"workloads": {"afterFinished": "-1m"}}},
     "field `objectRetentionPolicies.workloads.afterFinished`: Invalid value: -1m0s"),
    ({"objectRetentionPolicies": {"workloads": {"afterDeactivatedByKueue": "-2h"}}},
     'field `objectRetentionPolicies.workloads.afterDeactivatedByKueue`: Invalid value: "-2h0m0s"'),
    ({"featureGates": {"AdmissionFairSharing": True}, "admissionFairSharing": {"usageHalfLifeTime": "-1h"}},
     "field `admissionFairSharing.usageHalfLifeTime`: Invalid value: -1h0m0s"),
])
def test_a_negative_duration_is_refused_in_kueue_s_words(stanza: dict, error: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA2, **stanza}, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: {error}: must be greater than or equal to 0"
