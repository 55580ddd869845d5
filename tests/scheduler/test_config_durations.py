"""A Configuration's durations are read as Go's ``time.ParseDuration`` reads them (Kueue decodes them with it): every
form it takes is taken, every form it refuses is refused naming the field, and kueue-es's millisecond readers round
a sub-millisecond value up. The expected nanoseconds were printed by Go 1.26's own parser for these strings."""

from __future__ import annotations

import pytest

from connectors.k8s.pods_ready_validation import PodsReadyRule
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.afs import AfsFold
from kueue_es.scheduler.config import load_config, parse_duration, parse_duration_ns
from kueue_es.scheduler.config_record import load_recorded
from kueue_es.scheduler.pods_ready_timeouts import recovery_ms, unscheduled_ms
from projections.go_duration import DurationError, parse_ns
from projections.pods_ready import recorded_in_force

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}

TAKEN = [  # (text, nanoseconds as Go gives them)
    ("0", 0), ("+0", 0), ("-0", 0), ("0s", 0), ("-0s", 0),
    ("1ns", 1), ("1.5ns", 1), ("250us", 250_000), ("250\u00b5s", 250_000), ("250\u03bcs", 250_000),
    ("1.5ms", 1_500_000), ("90s", 90_000_000_000), ("1.5h", 5_400_000_000_000), ("1h30m", 5_400_000_000_000),
    ("-5m", -300_000_000_000), ("+5m", 300_000_000_000), (".5s", 500_000_000), ("2.s", 2_000_000_000),
    ("1h1m1s1ms1us1ns", 3_661_001_001_001), ("0.1s", 100_000_000), ("0.3333333333h", 1_199_999_999_880),
    ("9223372036854775807ns", 2**63 - 1), ("-9223372036854775808ns", -(2**63)),
    ("2562047h47m16.854775807s", 2**63 - 1), ("1.0000000000000000000009s", 1_000_000_000),
]

REFUSED = [  # (text, why)
    ("", "invalid duration ''$"), ("1", r"\(missing unit\)"), ("1.5", r"\(missing unit\)"),
    ("00", r"\(missing unit\)"), ("1d", r"\(unknown unit 'd'\)"), ("1S", r"\(unknown unit 'S'\)"),
    (" 1s", "invalid duration ' 1s'$"), ("1s ", r"\(unknown unit 's '\)"), ("1e3s", r"\(unknown unit 'e'\)"),
    ("--1s", "invalid duration '--1s'$"), (".s", "invalid duration '.s'$"), ("1h-1m", r"\(unknown unit 'h-'\)"),
    ("9223372036854775808ns", r"\(out of range\)"), ("2562048h", r"\(out of range\)"),
    ("\u0661s", "invalid duration"),
]


@pytest.mark.parametrize(("text", "ns"), TAKEN, ids=[t for t, _ in TAKEN])
def test_every_form_go_takes_is_taken_to_the_nanosecond(text: str, ns: int) -> None:
    assert parse_ns(text) == ns


@pytest.mark.parametrize(("text", "why"), REFUSED, ids=[repr(t) for t, _ in REFUSED])
def test_every_form_go_refuses_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(DurationError, match=why):
        parse_ns(text)


@pytest.mark.parametrize(("field", "stanza"), [
    ("multiKueue.workerLostTimeout", {"multiKueue": {"workerLostTimeout": "{}"}}),
    ("waitForPodsReady.recoveryTimeout", {"waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "{}"}}),
    ("admissionFairSharing.usageSamplingInterval", {"admissionFairSharing": {"usageSamplingInterval": "{}"}}),
    ("objectRetentionPolicies.workloads.afterFinished", {"objectRetentionPolicies": {"workloads": {
        "afterFinished": "{}"}}}),
    ("leaderElection.leaseDuration", {"leaderElection": {"leaseDuration": "{}"}}),  # a field kueue-es does not read
])
def test_a_configuration_takes_go_units_and_refuses_what_go_refuses_naming_the_field(field: str, stanza: dict) -> None:
    def at(value: str) -> dict:
        return {**V1BETA2, **_fill(stanza, value)}

    for text in ("250us", "250\u00b5s", "1.5ns", "1h30m", "+90s"):
        load_config(at(text))
    for text, why in (("1d", "unknown unit 'd'"), ("1", "missing unit"), ("2562048h", "out of range")):
        with pytest.raises(InvalidInput, match=rf"field `{field}`: invalid duration '{text}' \({why}\)"):
            load_config(at(text))


def _fill(tree: dict, value: str) -> dict:
    return {k: (_fill(v, value) if isinstance(v, dict) else value if v == "{}" else v) for k, v in tree.items()}


@pytest.mark.parametrize(("stanza", "error"), [
    ({"waitForPodsReady": {"timeout": "-5m"}}, "field `waitForPodsReady.timeout`: Invalid value: -5m0s: must be greater than or equal to 0"),
    ({"multiKueue": {"gcInterval": "-1m"}}, "field `multiKueue.gcInterval`: Invalid value: -1m0s: must be greater"),
    ({"multiKueue": {"workerLostTimeout": "-1m"}}, "field `multiKueue.workerLostTimeout`: Invalid value: -1m0s: must be greater"),
    ({"admissionFairSharing": {"usageSamplingInterval": "-1m"}},
     "field `admissionFairSharing.usageSamplingInterval`: Invalid value: -1m0s: must be greater than 0"),
    ({"waitForPodsReady": {"timeout": "1001us", "unscheduledTimeout": "1002us"}},
     r"field `waitForPodsReady.unscheduledTimeout`: Invalid value: 1.002ms: must be less than or equal to "
     r"waitForPodsReady.timeout \(1.001ms\)"),
])
def test_a_signed_duration_is_refused_where_kueue_refuses_its_value(stanza: dict, error: str) -> None:
    """A sign parses; Kueue's validation then refuses a negative value where it does, comparing nanoseconds (two
    durations a millisecond reading would make equal are told apart)."""
    with pytest.raises(InvalidInput, match=error):
        load_config({**V1BETA2, **stanza})


def test_a_negative_zero_is_zero_and_a_signed_value_kueue_leaves_alone_is_taken() -> None:
    cfg = load_config({**V1BETA2, "waitForPodsReady": {"timeout": "-0s", "recoveryTimeout": "-0s"},
                       "multiKueue": {"singleClusterPreemptionTimeout": "-1m"}})
    assert cfg.pods_ready.timeout == "30m"  # zero: v1beta2's default
    assert recovery_ms(cfg) is None  # zero: no recovery timeout


@pytest.mark.parametrize("timeout", ["0.5ns", "0.999ns", "0.0000000001s", "0.5ns0.5ns", "-0.5ns", "0m0.9ns"])
def test_a_timeout_go_reads_as_zero_is_v1beta2s_default_for_the_scheduler_and_the_fold(timeout: str) -> None:
    """Go truncates a fraction of a nanosecond, so these are its zero, which v1beta2 defaults to 30 minutes — not a
    0 ms deadline due at once. The fold reads the recorded document the same way."""
    doc = {**V1BETA2, "waitForPodsReady": {"timeout": timeout}}
    cfg = load_config(doc)
    assert (cfg.pods_ready.timeout, cfg.pods_ready.recovery_timeout) == ("30m", "30m")
    assert recorded_in_force(doc).timeout == "30m"


def test_a_timeout_of_one_nanosecond_is_not_zero() -> None:
    cfg = load_config({**V1BETA2, "waitForPodsReady": {"timeout": "0.5ns1ns"}})
    assert (cfg.pods_ready.timeout, parse_duration(cfg.pods_ready.timeout)) == ("0.5ns1ns", 1)


def test_milliseconds_round_up_so_a_positive_duration_is_never_zero() -> None:
    """kueue-es's clock counts whole milliseconds: a deadline of d is reached when the elapsed milliseconds are at
    least d, so d rounds up — and a sub-millisecond timeout stays a timeout (zero would turn it off)."""
    assert [parse_duration(t) for t in ("1ns", "999us", "1ms", "1500us", "1.0000001s", "-1500us")] == \
        [1, 1, 1, 2, 1001, -1]
    cfg = load_config({**V1BETA2, "featureGates": {"WaitForPodsReadyUnscheduledTimeout": True},
                       "waitForPodsReady": {"timeout": "1ms", "recoveryTimeout": "500us", "unscheduledTimeout": "1ns"}})
    assert (recovery_ms(cfg), unscheduled_ms(cfg)) == (1, 1)


def test_a_sub_millisecond_sampling_interval_is_not_kueues_default() -> None:
    """Only zero is defaulted to 5 minutes; 500µs samples as often as kueue-es's clock can, every millisecond."""
    cfg = load_config({**V1BETA2, "featureGates": {"AdmissionFairSharing": True},
                       "admissionFairSharing": {"usageHalfLifeTime": "500us", "usageSamplingInterval": "500us"}})
    assert cfg.admission_fair_sharing is not None
    fold = AfsFold(cfg.admission_fair_sharing)
    assert fold.interval == 1
    assert fold.half_life == 0.5  # divides elapsed times unrounded: not the zero that resets usage


def test_the_longest_workload_timeout_is_the_whole_seconds_within_the_limit() -> None:
    """``maxTimeoutOnWorkload`` bounds a job's timeout in whole seconds: 2s exceeds 1.9999999s, as in Kueue."""
    cfg = load_config({**V1BETA2, "featureGates": {"WorkloadLevelWaitForPodsReady": True},
                       "waitForPodsReady": {"timeout": "5m", "maxTimeoutOnWorkload": "1.9999999s"}})
    rule = PodsReadyRule.of(cfg)
    assert rule is not None and rule.max_seconds == 1
    assert parse_duration_ns("1.9999999s") == 1_999_999_900


def test_a_recorded_duration_an_older_kueue_es_took_is_loaded_as_it_took_it() -> None:
    """Before durations were read as Go reads them, kueue-es took spaces around one and nothing for zero; a log
    that recorded such a document replays as it did (a file with them is refused, as Kueue refuses it)."""
    doc = {**V1BETA2, "waitForPodsReady": {"timeout": " 5m", "recoveryTimeout": ""},
           "multiKueue": {"workerLostTimeout": "2m "}}
    recorded = load_recorded(ev.ConfigRecorded(time=0, document=doc), 7)
    assert recorded == load_config({**V1BETA2, "waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "0"},
                                    "multiKueue": {"workerLostTimeout": "2m"}})
    assert recovery_ms(recorded) is None
    with pytest.raises(InvalidInput, match=r"field `multiKueue.workerLostTimeout`: invalid duration '2m '"):
        load_config(doc)  # the first Kueue's decoder meets: keys in sorted order
    with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.recoveryTimeout`: invalid duration ''"):
        load_config({k: v for k, v in doc.items() if k != "multiKueue"})
    with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.timeout`: invalid duration ' 5m'"):
        load_config({**V1BETA2, "waitForPodsReady": {"timeout": " 5m"}})


def test_a_negative_recovery_timeout_is_refused_only_while_wait_for_pods_ready_is_in_force() -> None:
    """Kueue's validateWaitForPodsReady returns at once when waitForPodsReady is off (the newest Kueue, and v1beta1's
    ``enable: false`` before it), so the sign of ``recoveryTimeout`` matters only when it is on."""
    with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.recoveryTimeout`: Invalid value: -1m0s: must be greater"):
        load_config({**V1BETA2, "waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "-1m"}})
    off = load_config({**V1BETA2, "featureGates": {"DisableWaitForPodsReady": True},
                       "waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "-1m"}})
    assert not off.pods_ready.enable
    v1beta1_off = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                               "waitForPodsReady": {"enable": False, "timeout": "5m", "recoveryTimeout": "-1m"}})
    assert not v1beta1_off.pods_ready.enable
    with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.recoveryTimeout`: invalid duration"):
        load_config({**V1BETA2, "featureGates": {"DisableWaitForPodsReady": True},
                     "waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "soon"}})  # decoding, on or off
