"""``null`` in a Configuration is taken where Kueue's decoder takes it, and means what it means to Go: an unset
field (then defaulted), or a map value's or list entry's zero; refused, naming the field, where Go refuses it. The
cases are ``config_cases/nulls.yaml``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from events import schema as ev
from events.errors import InvalidInput
from events.manifests import load_text
from kueue_es.commands._common import load_kueue_config_document
from kueue_es.scheduler.config import as_decoded, load_config
from kueue_es.scheduler.config_record import load_recorded

CASES: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "config_cases" / "nulls.yaml").read_text())
V1BETA2 = "config.kueue.x-k8s.io/v1beta2"


def _document(case: dict[str, Any], fields: str) -> dict[str, Any]:
    """The Configuration document of ``fields``, read from YAML as a file of it is."""
    head = f"apiVersion: {case.get('apiVersion', V1BETA2)}\nkind: Configuration\n"
    body = "" if fields.strip() == "{}" else fields
    configs = load_text(head + body, "kueue.yaml").configs
    assert len(configs) == 1
    return configs[0]


TAKEN = [c for c in CASES if "as" in c]
REFUSED = [c for c in CASES if "refused" in c]


@pytest.mark.parametrize("case", TAKEN, ids=[c["name"] for c in TAKEN])
def test_null_is_taken_as_go_leaves_the_field(case: dict[str, Any]) -> None:
    given, meant = _document(case, case["config"]), _document(case, case["as"])
    assert load_config(given, "kueue.yaml") == load_config(meant, "kueue.yaml")
    assert as_decoded(given) == meant  # what a scheduler records: no null left where Go keeps none


@pytest.mark.parametrize("case", REFUSED, ids=[c["name"] for c in REFUSED])
def test_null_is_refused_where_go_refuses_it_naming_the_field(case: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match=case["refused"]):
        load_config(_document(case, case["config"]), "kueue.yaml")


def test_the_recorded_document_of_a_file_with_nulls_loads_back_as_the_file(tmp_path: Path) -> None:
    """``--config`` records the document with Go's reading of its nulls, and the log loads it back the same."""
    path = tmp_path / "kueue.yaml"
    path.write_text(f"apiVersion: {V1BETA2}\nkind: Configuration\nmultiKueue:\n  origin: ~\n"
                    "featureGates: {PartialAdmission: null}\nwaitForPodsReady: {timeout: 5m, recoveryTimeout: null}\n")
    loaded = load_kueue_config_document(str(path))
    assert loaded is not None
    config, document = loaded
    assert document == {"apiVersion": V1BETA2, "kind": "Configuration", "multiKueue": {},
                        "featureGates": {"PartialAdmission": False}, "waitForPodsReady": {"timeout": "5m"}}
    assert load_recorded(ev.ConfigRecorded(time=0, document=document), 0) == config
    assert config.multi_kueue.origin == "multikueue" and config.pods_ready.recovery_timeout == "5m"
