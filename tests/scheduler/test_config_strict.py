"""A Configuration file's unknown fields are refused (Kueue's strict decoding); one the log recorded before kueue-es
refused them is loaded as it was taken, so an old log still replays."""

from __future__ import annotations

import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import load_recorded

DOC = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
       "waitForPodsReady": {"timeout": "5m", "blockAdmision": True}, "fairSharing": {}}


def test_a_file_s_unknown_field_is_refused_but_a_recorded_one_is_loaded_as_taken() -> None:
    with pytest.raises(InvalidInput, match='kueue.yaml: Configuration: strict decoding error: unknown field '
                                           '"waitForPodsReady.blockAdmision"$'):
        load_config(DOC, "kueue.yaml")
    recorded = load_recorded(ev.ConfigRecorded(time=0, document=DOC), 7)
    assert recorded.fair_sharing is not None and recorded.wait_for_pods_ready is not None
