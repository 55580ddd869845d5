"""ConfigurablePreemptions' alpha PreemptionConfig CRD against the real apiserver: it installs (v1alpha1 only,
cluster-scoped), a PreemptionConfig is created and decoded by the view the watcher uses, and the CRD's bounds refuse
an unknown trigger, scope or comparison, a negative bound, a bad rule name and two rules of one name."""

from __future__ import annotations

import secrets

import msgspec
import pytest
from kubehelp import connect

from connectors.k8s import crds
from connectors.k8s.errors import Invalid, KubeError
from connectors.k8s.resources import PREEMPTION_CONFIGS
from events import objects as o

pytestmark = pytest.mark.kube


def _config(name: str, rules: list) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig", "metadata": {"name": name},
            "spec": {"rules": rules}}


def _rule(**over) -> dict:
    return {"name": "r", "activationPolicy": {"trigger": "InsufficientQuota"},
            "candidateSelectors": [{"scope": "WithinCohortTree", "priority": {"mode": "Base", "comparison": "LessThan"},
                                    "numericLabels": [{"key": "example.com/size", "comparison": "LessThan",
                                                       "minValue": 0}]}], **over}


@pytest.mark.asyncio
async def test_the_preemption_config_crd_serves_and_bounds_the_kind(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        assert await crds.install(kc, docs=[crds.preemption_config_crd()]) == ["preemptionconfigs.kueue.x-k8s.io"]
        sfx = secrets.token_hex(3)
        await kc.create(PREEMPTION_CONFIGS, _config(f"hero-{sfx}", [_rule()]))
        got = msgspec.json.decode(await kc.get(PREEMPTION_CONFIGS, f"hero-{sfx}"), type=o.PreemptionConfig)
        assert got.spec.rules[0].candidate_selectors[0].priority == o.PreemptionConfigPriority(mode="Base", comparison="LessThan")
        bad = [
            [_rule(activationPolicy={"trigger": "Sometimes"})],
            [_rule(candidateSelectors=[{"scope": "SameCohort"}])],
            [_rule(candidateSelectors=[{"scope": "AnyClusterQueue",
                                        "numericLabels": [{"key": "k", "comparison": "Less"}]}])],
            [_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"key": "k", "maxValue": -1}]}])],
            [_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "priority": {"mode": "Effective",
                                                                                 "comparison": "LessThan"}}])],
            [_rule(name="Bad_Name")],
            [_rule(), _rule()],
            [_rule(activationPolicy={})],
        ]
        for i, rules in enumerate(bad):
            with pytest.raises((Invalid, KubeError)):
                await kc.create(PREEMPTION_CONFIGS, _config(f"bad-{i}-{sfx}", rules))
