"""CEL device selectors, evaluated where the result is exactly Kubernetes' (else ``None``:
unchecked, never a denial).

Kubernetes' environment (k8s.io/dynamic-resource-allocation/cel/compile.go, v0.36.3):
``device.driver``; ``device.attributes[domain][id]`` and ``device.capacity[domain][id]``,
where a name without a domain belongs to the driver's domain and a missing domain reads as
an empty map; ``version`` attributes are semver values and capacities are quantities, with
the Kubernetes CEL library's ``quantity()``, ``semver()``, ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``major``/``minor``/``patch``. A runtime error there fails the allocation
attempt; here it is ``None``.

We evaluate with the PyPI package common-expression-language (module ``cel``, a Rust CEL
interpreter) and only expressions whose functions are all in ``EXACT_FUNCTIONS``: the
operators and the library calls above, whose semantics tests/core/dra/test_selectors.py
checks against the cases of upstream cel/compile_test.go. Anything else (string
extensions, regexes, arithmetic, ``cel.bind``, list attributes) stays unchecked.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import cel

from core.dra.objects import AttributeValue, Device, Version
from core.errors import InvalidInput
from core.quantity import parse_quantity

# The CEL interpreter's names for the operators (and our library functions) whose results
# match cel-go's in the DRA environment for the values devices carry.
EXACT_FUNCTIONS: Final = frozenset(
    {
        "!_",
        "_&&_",
        "_||_",
        "_==_",
        "_!=_",
        "_<_",
        "_<=_",
        "_>_",
        "_>=_",
        "_[_]",
        "_?_:_",
        "@in",
        "@not_strictly_false",
        "quantity",
        "semver",
        "compareTo",
        "isGreaterThan",
        "isLessThan",
        "major",
        "minor",
        "patch",
    }
)
_SEMVER: Final = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_Q: Final = "__quantity"
_V: Final = "__semver"


class _Unsupported(Exception):
    """A value the Kubernetes environment would reject at run time."""


def _quantity(text: object) -> dict[str, str]:
    if not isinstance(text, str):
        raise _Unsupported(f"quantity({text!r})")
    try:
        return {_Q: str(parse_quantity(text))}
    except InvalidInput as e:
        raise _Unsupported(str(e)) from None


def _semver_key(text: str) -> tuple[Any, ...]:
    m = _SEMVER.match(text)
    if m is None:
        raise _Unsupported(f"semver {text!r}")
    pre = m[4]
    # semver 2.0 precedence: a release sorts after its pre-releases; numeric identifiers
    # sort before alphanumeric ones and compare as numbers
    pre_key = (
        (1,)
        if pre is None
        else (
            0,
            tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")),
        )
    )
    return (int(m[1]), int(m[2]), int(m[3]), pre_key)


def _semver(text: object) -> dict[str, str]:
    if not isinstance(text, str):
        raise _Unsupported(f"semver({text!r})")
    _semver_key(text)
    return {_V: text.partition("+")[0]}  # build metadata does not take part in equality


def _ordered(a: object, b: object) -> tuple[Any, Any]:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if _Q in a and _Q in b:
            return Fraction(a[_Q]), Fraction(b[_Q])
        if _V in a and _V in b:
            return _semver_key(a[_V]), _semver_key(b[_V])
    raise _Unsupported(f"compare {a!r} with {b!r}")


def _compare_to(a: object, b: object) -> int:
    x, y = _ordered(a, b)
    return (x > y) - (x < y)


def _part(index: int) -> Callable[[object], int]:
    def part(v: object) -> int:
        if not isinstance(v, Mapping) or _V not in v:
            raise _Unsupported(f"{v!r} is not a semver")
        return int(_semver_key(v[_V])[index])

    return part


_LIBRARY: Final[dict[str, Callable[..., Any]]] = {
    "quantity": _quantity,
    "semver": _semver,
    "compareTo": _compare_to,
    "isGreaterThan": lambda a, b: _compare_to(a, b) > 0,
    "isLessThan": lambda a, b: _compare_to(a, b) < 0,
    "major": _part(0),
    "minor": _part(1),
    "patch": _part(2),
}
_FAILED: Final = {"__failed": True}


def _guarded(failures: list[str], names: Iterable[str]) -> dict[str, Callable[..., Any]]:
    """The library for one evaluation: a function never raises into the interpreter (it
    would print the error); it records the failure, which makes the result unknown."""

    def guard(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            try:
                return fn(*args)
            except _Unsupported as e:
                failures.append(f"{name}: {e}")
                return _FAILED

        return call

    return {name: guard(name, _LIBRARY[name]) for name in names}


@dataclass(frozen=True, slots=True)
class Compiled:
    program: Any
    library: frozenset[str]  # the library functions it calls (the others are operators)


@functools.lru_cache(maxsize=4096)
def compiled(expression: str) -> Compiled | None:
    """The program for ``expression``, or None when it is outside what we evaluate exactly.
    Cached: compiling costs ~0.5 ms, one evaluation ~0.03 ms (docs/dra.md), and the same
    class selector is run against every device of every node."""
    try:
        program = cel.compile(expression)
    except (ValueError, RuntimeError):
        return None
    used = set(program.functions())
    if not used <= EXACT_FUNCTIONS:
        return None
    return Compiled(program, frozenset(used & _LIBRARY.keys()))


def _value(value: object) -> object:
    if isinstance(value, Version):
        return _semver(value.text)
    if isinstance(value, tuple):
        raise _Unsupported("list attribute (DRAListTypeAttributes)")
    return value


def split_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of a qualified name; no domain means the driver's own."""
    domain, slash, ident = name.rpartition("/")
    return (domain, ident) if slash else (driver, name)


def _activation(
    driver: str,
    multiple: bool,
    attributes: Iterable[tuple[str, AttributeValue]],
    capacity: Iterable[tuple[str, Fraction]],
) -> dict[str, Any]:
    attrs: dict[str, dict[str, object]] = {}
    for name, value in attributes:
        domain, ident = split_name(name, driver)
        attrs.setdefault(domain, {})[ident] = _value(value)
    caps: dict[str, dict[str, object]] = {}
    for name, amount in capacity:
        domain, ident = split_name(name, driver)
        caps.setdefault(domain, {})[ident] = {_Q: str(amount)}
    return {
        "driver": driver,
        "allowMultipleAllocations": multiple,
        "attributes": attrs,
        "capacity": caps,
    }


def device_activation(driver: str, device: Device) -> dict[str, Any]:
    """The ``device`` variable of Kubernetes' DRA CEL environment for this device."""
    return _activation(
        driver, device.multiple_allocations, device.attributes.items(), device.capacity.items()
    )


def _run(c: Compiled, activation: dict[str, Any]) -> bool | None:
    failures: list[str] = []
    functions = _guarded(failures, c.library)
    try:
        result = c.program.execute(
            cel.Context(variables={"device": activation}, functions=functions)
        )
    except (RuntimeError, ValueError, TypeError, KeyError):
        return None
    return result if isinstance(result, bool) and not failures else None


@functools.lru_cache(maxsize=65536)
def _selectors_match(
    expressions: tuple[str, ...],
    driver: str,
    multiple: bool,
    attributes: frozenset[tuple[str, AttributeValue]],
    capacity: frozenset[tuple[str, Fraction]],
) -> bool | None:
    """Cached per device content: devices of one model repeat on every node, and one
    evaluation costs ~0.1 ms with its activation (docs/dra.md has the figures)."""
    try:
        activation = _activation(driver, multiple, attributes, capacity)
    except _Unsupported:
        return None
    known: bool | None = True
    for expression in expressions:
        program = compiled(expression)
        result = None if program is None else _run(program, activation)
        if result is False:
            return False
        if result is None:
            known = None
    return known


def selectors_match(expressions: tuple[str, ...], driver: str, device: Device) -> bool | None:
    """Whether every selector accepts the device: False as soon as one rejects it (the
    allocator stops there too), else None if one is not exactly known, else True."""
    if not expressions:
        return True
    return _selectors_match(
        expressions,
        driver,
        device.multiple_allocations,
        frozenset(device.attributes.items()),
        frozenset(device.capacity.items()),
    )


def matches(expression: str, driver: str, device: Device) -> bool | None:
    """Whether the selector accepts the device: True, False, or None (not exactly known)."""
    return selectors_match((expression,), driver, device)
