"""CEL selectors against Kubernetes' DRA environment: the cases of upstream
k8s.io/dynamic-resource-allocation/cel/compile_test.go (v0.36.3) that use the default
features, with the upstream result. Ours must equal it where we claim to know, and be None
(unchecked) where upstream errors or we do not evaluate exactly; the agreement figure in
docs/dra.md is counted by test_agreement_with_upstream."""

from __future__ import annotations

from typing import Any

import pytest

from core.dra.objects import Device, Version
from core.dra.selectors import compiled, matches

D = "dra.example.com"
ERROR = "error"  # upstream: a compile or runtime error (the allocation attempt fails)

# (expression, driver, attributes, capacity, upstream result)
CASES: list[tuple[str, str, dict[str, Any], dict[str, str], Any]] = [
    ("true", "", {}, {}, True),
    ("false", "", {}, {}, False),
    ("?!", "", {}, {}, ERROR),
    (
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        "",
        {},
        {},
        ERROR,
    ),
    ('"no-such-domain" in device.attributes', "", {}, {}, False),
    ('"dra.example.com" in device.attributes', "", {f"{D}/something": True}, {}, True),
    ('device.driver == ""', "", {}, {}, True),
    ('device.driver == "dra.example.com"', D, {}, {}, True),
    ('device.attributes["dra.example.com"].name', D, {"name": True}, {}, True),
    ('device.attributes["dra.example.com"]["name"]', D, {"name": True}, {}, True),
    ('device.attributes["other.example.com"].name', D, {"other.example.com/name": True}, {}, True),
    ('device.attributes["dra.example.com"].name > 0', D, {"name": 1}, {}, True),
    ('device.attributes["dra.example.com"].name == "fish"', D, {"name": "fish"}, {}, True),
    (
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
        D,
        {"name": Version("1.0.0")},
        {},
        True,
    ),
    (
        'device.attributes["dra.example.com"].name.isLessThan(semver("1.0.0-rc.1"))',
        D,
        {"name": Version("1.0.0-alpha")},
        {},
        True,
    ),
    (
        'device.attributes["dra.example.com"].name == semver("1.0.0+build")',
        D,
        {"name": Version("1.0.0")},
        {},
        True,
    ),
    (
        'device.attributes["dra.example.com"].name.major() == 2',
        D,
        {"name": Version("2.3.4")},
        {},
        True,
    ),
    (
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        D,
        {},
        {"name": "1Mi"},
        True,
    ),
    (
        'device.capacity["dra.example.com"].name.compareTo(quantity("1Mi")) == 0',
        D,
        {},
        {"name": "1048576"},
        True,
    ),
    (
        'device.capacity["dra.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        D,
        {},
        {"memory": "80Gi"},
        True,
    ),
    (
        'device.capacity["dra.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        D,
        {},
        {"memory": "16Gi"},
        False,
    ),
    ('device.capacity["dra.example.com"].name == quantity("1000m")', D, {}, {"name": "1"}, True),
    (
        'device.attributes["dra.example.com"].model == "a100" && device.driver == "dra.example.com"',
        D,
        {"model": "a100"},
        {},
        True,
    ),
    ('device.attributes["dra.example.com"].missing == "x"', D, {"model": "a100"}, {}, ERROR),
    ('"missing" in device.attributes["dra.example.com"]', D, {"model": "a100"}, {}, False),
    ('has(device.attributes["dra.example.com"].model)', D, {"model": "a100"}, {}, True),
    (
        'device.attributes["dra.example.com"].ok || device.attributes["dra.example.com"].missing',
        D,
        {"ok": True},
        {},
        True,
    ),
    # outside the exact subset: upstream evaluates them, we leave them unchecked
    ('device.attributes["dra.example.com"].name.matches("^f")', D, {"name": "fish"}, {}, True),
    ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', D, {"name": True}, {}, True),
    (
        'device.attributes["dra.example.com"].name.lowerAscii() == "fish"',
        D,
        {"name": "FISH"},
        {},
        True,
    ),
]


def _device(attributes: dict[str, Any], capacity: dict[str, str]) -> Device:
    from core.quantity import parse_quantity

    return Device("d", attributes, {k: parse_quantity(v) for k, v in capacity.items()})


@pytest.mark.parametrize(("expression", "driver", "attributes", "capacity", "upstream"), CASES)
def test_never_disagrees_with_upstream(
    expression: str,
    driver: str,
    attributes: dict[str, Any],
    capacity: dict[str, str],
    upstream: Any,
) -> None:
    ours = matches(expression, driver, _device(attributes, capacity))
    if upstream == ERROR:
        assert ours is None
    else:
        assert ours in (upstream, None)


def test_agreement_with_upstream() -> None:
    """The figure: how many upstream results we reproduce exactly (the rest are None)."""
    exact = sum(
        1
        for e, d, a, c, upstream in CASES
        if upstream != ERROR and matches(e, d, _device(a, c)) == upstream
    )
    known = sum(1 for *_, upstream in CASES if upstream != ERROR)
    print(f"CEL agreement: {exact} of {known} upstream results reproduced exactly")
    assert exact == known - 3  # matches, cel.bind, lowerAscii: left unchecked


def test_only_the_exact_subset_is_compiled() -> None:
    assert compiled('device.driver == "x"') is not None
    assert compiled('device.attributes["x"].y.matches("a")') is None
    assert compiled('device.attributes["x"].y + 1 > 2') is None  # arithmetic: overflow rules differ
    assert compiled("?!") is None


def test_a_failing_library_call_is_unknown_and_prints_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """quantity("bad") errors upstream; here it is None, and the interpreter is never handed
    a Python exception (it would print it)."""
    device = _device({}, {"m": "1Gi"})
    assert matches(f'device.capacity["{D}"].m.compareTo(quantity("bad")) > 0', D, device) is None
    assert matches('quantity("bad") == quantity("bad")', D, device) is None
    assert matches('semver("1.0") == semver("1.0")', D, device) is None  # not strict semver
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_programs_compiled_in_one_thread_run_in_another() -> None:
    """The webhook evaluates off the event loop: a cached program must work in any thread."""
    import threading

    expression = f'device.attributes["{D}"].model == "a100"'
    device = _device({"model": "a100"}, {})
    assert compiled(expression) is not None
    results: list[object] = []
    thread = threading.Thread(
        target=lambda: results.append(matches(expression, D, _device({"model": "t4"}, {})))
    )
    thread.start()
    thread.join()
    assert results == [False] and matches(expression, D, device) is True
