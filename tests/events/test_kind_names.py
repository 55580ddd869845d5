"""The apiserver's stricter rules for some kinds' names, as ``kueue-es import`` refuses them (events/manifests.py):
a Job's name is a label value of its pod template (unless it picks its selector by hand), an Indexed Job's last pod
hostname a DNS label, and a PriorityClass named ``system-...`` one of Kubernetes' own."""

from __future__ import annotations

import pytest

from events.errors import InvalidInput
from events.manifests import load_text


def _job(name: str, **spec: object) -> str:
    extra = "".join(f"  {k}: {v}\n" for k, v in spec.items())
    return (f"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: ns\nspec:\n{extra}"
            "  template:\n    spec:\n      containers: [{name: c, image: i}]\n")


def _priority_class(name: str, value: int, default: bool = False) -> str:
    return (f"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {name}\nvalue: {value}\n"
            f"globalDefault: {str(default).lower()}\n")


def _refused(text: str) -> str:
    with pytest.raises(InvalidInput) as exc:
        load_text(text, "in.yaml")
    return str(exc.value)


def test_a_job_name_longer_than_a_label_value_is_refused() -> None:
    name = "j" * 64
    assert _refused(_job(name)) == (f"in.yaml: document 1 (Job {name}): field `spec.template.labels`: "
                                    f'Invalid value: "{name}": must be no more than 63 characters')
    assert len(load_text(_job("j" * 63)).objects) == 1
    assert len(load_text(_job("j" * 100, manualSelector="true")).objects) == 1  # no job-name labels then


def test_an_indexed_job_whose_last_pod_hostname_is_no_dns_label_is_refused() -> None:
    name = "a" * 60  # 60 + "-10" is 63: fine; "-100" is 64: too long
    assert len(load_text(_job(name, completionMode="Indexed", completions=11, parallelism=1)).objects) == 1
    assert _refused(_job(name, completionMode="Indexed", completions=101, parallelism=1)).endswith(
        f'field `metadata.name`: Invalid value: "{name}": will not able to create pod with invalid DNS label: '
        f"{name}-100")
    assert "invalid DNS label: a.b-1" in _refused(_job("a.b", completionMode="Indexed", completions=2))
    assert len(load_text(_job("a.b", completions=2)).objects) == 1  # NonIndexed: a dot is fine


def test_priority_class_names_with_the_system_prefix_are_reserved() -> None:
    reserved = "field `metadata.name`: Forbidden: priority class names with 'system-' prefix are reserved for " \
               "system use only. error: "
    assert _refused(_priority_class("system-high", 10)).endswith(
        reserved + "system-high is not a known system priority class")
    assert _refused(_priority_class("system-node-critical", 10)).endswith(
        reserved + "value of system-node-critical PriorityClass must be 2000001000")
    assert _refused(_priority_class("system-cluster-critical", 2000000000, True)).endswith(
        reserved + "globalDefault of system-cluster-critical PriorityClass must be false")
    for name, value in (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000)):
        assert len(load_text(_priority_class(name, value)).objects) == 1


def test_a_user_priority_class_is_at_most_one_billion() -> None:
    assert _refused(_priority_class("high", 1000000001)).endswith(
        "field `value`: Forbidden: maximum allowed value of a user defined priority is 1000000000")
    assert len(load_text(_priority_class("high", 1000000000)).objects) == 1
