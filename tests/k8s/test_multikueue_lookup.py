"""The Job webhook's question "is this queue a MultiKueue one?" (``spec.managedBy`` defaulting): Kueue asks
its cache for the ClusterQueue's checks, where a check not created yet is simply absent, so a MultiKueue check
further down the list still answers yes."""

import json

import pytest

from connectors.k8s.errors import NotFound, Unavailable
from connectors.k8s.webhook import multikueue_lookup

pytestmark = pytest.mark.asyncio

MULTIKUEUE = {"spec": {"controllerName": "kueue.x-k8s.io/multikueue"}}
PROVISIONING = {"spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}


class Apiserver:
    def __init__(self, checks: list[str], objects: dict[str, dict],
                 unavailable: frozenset[str] = frozenset()):
        self.objects = {("LocalQueue", "lq"): {"spec": {"clusterQueue": "cq"}},
                        ("ClusterQueue", "cq"): {"spec": {"admissionChecksStrategy": {
                            "admissionChecks": [{"name": n} for n in checks]}}}}
        self.objects.update({("AdmissionCheck", name): obj for name, obj in objects.items()})
        self.unavailable = unavailable

    async def get(self, resource, name, namespace=None):
        kind = resource.kind
        if name in self.unavailable:
            raise Unavailable(f"{kind} {name}: connection refused")
        if (kind, name) not in self.objects:
            raise NotFound(f'{kind} "{name}" not found')
        return json.dumps(self.objects[(kind, name)]).encode()


@pytest.mark.parametrize("checks", [["not-yet", "mk"], ["mk", "not-yet"], ["prov", "not-yet", "mk"]])
async def test_a_missing_check_listed_before_the_multikueue_one_is_skipped(checks):
    api = Apiserver(checks, {"mk": MULTIKUEUE, "prov": PROVISIONING})
    assert await multikueue_lookup(api)("ns", "lq") is True


async def test_a_check_that_cannot_be_read_does_not_hide_the_multikueue_one_after_it():
    api = Apiserver(["flaky", "mk"], {"mk": MULTIKUEUE, "flaky": PROVISIONING},
                    unavailable=frozenset({"flaky"}))
    assert await multikueue_lookup(api)("ns", "lq") is True


async def test_no_multikueue_check_among_those_that_exist_answers_no():
    api = Apiserver(["prov", "not-yet"], {"prov": PROVISIONING})
    assert await multikueue_lookup(api)("ns", "lq") is False


async def test_a_missing_local_queue_answers_no():
    api = Apiserver(["mk"], {"mk": MULTIKUEUE})
    assert await multikueue_lookup(api)("ns", "other") is False
