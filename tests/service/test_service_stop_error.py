"""Which error the Kubernetes service reports when its task groups stop it."""

from __future__ import annotations

from events.errors import InvalidInput, LogError
from kueue_es.kube_service import first_error


def test_an_error_of_kueue_es_nested_in_task_groups_is_the_one_reported() -> None:
    """The connector runs its own task group, and the provisioning applier one more under it: an error of the
    log raised there arrives two groups down, and is still the one the service reports."""
    deep = LogError("segment 00000000000000000000.log: offset 7: checksum mismatch")
    group = BaseExceptionGroup("service", [ValueError("other"), ExceptionGroup("connector", [
        ExceptionGroup("applier", [deep])])])
    assert first_error(group) is deep


def test_the_first_error_of_kueue_es_in_order_is_reported_and_none_when_there_is_none() -> None:
    first, second = InvalidInput("first"), InvalidInput("second")
    assert first_error(BaseExceptionGroup("g", [first, ExceptionGroup("h", [second])])) is first
    assert first_error(BaseExceptionGroup("g", [ValueError("x"), ExceptionGroup("h", [KeyError("y")])])) is None
