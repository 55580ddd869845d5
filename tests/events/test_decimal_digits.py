"""Numbers read from text that anyone writes (a resourceVersion in an imported object, an annotation): only ASCII
digits are read as a number. ``str.isdigit`` also says yes to other digits ('²', '٣') that ``int`` refuses or reads,
and an object carrying one must neither crash the fold nor the connector."""

from __future__ import annotations

import pytest

from connectors.k8s.client import resource_version_number
from connectors.k8s.job_sync import generated_min_count
from connectors.k8s.resources import MIN_PARALLELISM
from events.objects import resource_version_order


@pytest.mark.parametrize("text", ["²", "٣", "12²"])
def test_a_resource_version_of_other_digits_is_no_number(text: str) -> None:
    assert resource_version_order(text) == -1 and resource_version_number(text) == -1
    assert resource_version_order("42") == 42 == resource_version_number("42")


def test_a_min_parallelism_of_other_digits_gives_no_min_count() -> None:
    assert generated_min_count({MIN_PARALLELISM: "²"}, 4, True) is None
    assert generated_min_count({MIN_PARALLELISM: "2"}, 4, True) == 2
