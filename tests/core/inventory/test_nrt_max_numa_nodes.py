"""scheduler-plugins v0.34.7 ``pkg/noderesourcetopology/nodeconfig/topologymanager_test.go
TestConfigFromAttributes`` (issue 28): the NRT attribute ``topologyManagerMaxNUMANodes`` as
``updateFromAttributes`` reads it (valid above 1, clamped to ``LimitNUMANodes``, 1024)."""

from __future__ import annotations

import pytest

from core.inventory.build import build_inventory
from tests.builders import objects as k8s


@pytest.mark.parametrize(
    ("value", "expected", "reported"),
    [
        ("A", 8, True),  # invalid-nodes-string
        ("0", 8, True),  # invalid-nodes-zero
        ("-2", 8, True),  # invalid-nodes-negative
        ("1", 8, True),  # IsValidMaxNUMANodes: value > 1
        ("16", 16, False),  # valid-nodes
        ("65535", 1024, False),  # valid-nodes-upper-bound: clamped to LimitNUMANodes
        ("9" * 5000, 1024, False),  # far past the cap: clamped, never parsed whole
    ],
)
def test_config_from_attributes_max_numa_nodes(value: str, expected: int, reported: bool) -> None:
    """Upstream keeps the default (8) for an invalid value and logs nothing the user sees;
    numagate keeps the same default and reports the value in the inventory's errors."""
    nrt = k8s.nrt(
        "w",
        k8s.two_zones(),
        attributes={"topologyManagerPolicy": "restricted", "topologyManagerMaxNUMANodes": value},
    )
    inventory = build_inventory([nrt])
    (node,) = inventory.nodes
    assert node.max_numa_nodes == expected
    assert bool(inventory.errors) is reported
    if reported:
        assert f"attributes[1].value: '{value}'" in inventory.errors[0]
        assert "between 2 and 1024" in inventory.errors[0]
