"""A cheaper ``__init__`` for the core's frozen, slotted dataclasses (issue 27).

A frozen dataclass's generated ``__init__`` sets every field through
``object.__setattr__(self, "name", value)``: a builtins lookup, an attribute lookup and a
generic setattr that finds the slot by name, per field. :func:`fast_init` replaces it
with one that calls each slot's own descriptor (``Cls.__dict__[name].__set__``), which
skips the class's raising ``__setattr__`` the same way but not the name lookups. Nothing
else changes: the class stays a frozen dataclass (equality, hashing, repr,
``dataclasses.replace`` and ``fields``, orjson's encoding), setting an attribute still
raises ``FrozenInstanceError``, and the signature (names, order, defaults, default
factories) is the generated one's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """The default of a field with a default factory (shown as the dataclass shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


def fast_init(cls: type[T]) -> type[T]:
    """Give the frozen, slotted dataclass ``cls`` the cheaper ``__init__`` (see above)."""
    params = getattr(cls, "__dataclass_params__", None)
    if (
        params is None
        or not params.frozen
        or "__slots__" not in cls.__dict__
        or hasattr(cls, "__post_init__")
    ):
        raise TypeError(f"{cls.__name__}: fast_init needs a frozen dataclass with slots")
    space: dict[str, Any] = {"_NOTHING": _Factory()}
    args: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only or f.name.startswith("_"):
            raise TypeError(f"{cls.__name__}.{f.name}: fast_init takes plain fields only")
        space[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            space[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            space[f"_factory_{f.name}"] = f.default_factory
            args.append(f"{f.name}=_NOTHING")
            body.append(f" if {f.name} is _NOTHING: {f.name} = _factory_{f.name}()")
        else:
            args.append(f.name)
        body.append(f" _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(args)}) -> None:\n" + "\n".join(body) + "\n"
    exec(source, space)  # the text is built above from the class's own field names
    init = space["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {f.name: f.type for f in dataclasses.fields(cls)} | {"return": None}
    cls.__init__ = init  # type: ignore[misc]
    return cls
