"""What a function's annotations say about the values it takes and returns.

One place decides how an annotation shapes a recorded value (RFC 0011,
"Values and their types"):

- an annotation msgspec can build (``int``, ``Decimal``, ``list[Parcel]``, a
  dataclass, a ``msgspec.Struct``; a Pydantic model through its
  ``model_validate``) converts the value, and a value that does not validate
  is an error;
- an annotation nothing can build (``object``, ``Any``, a Protocol,
  ``Iterable[...]``, a plain class, a union msgspec refuses) means "anything":
  the value is taken as it decodes, plainly;
- where the value is taken plainly, only what comes back as itself may be
  recorded (``changed`` finds what would not: a tuple comes back a list, a
  ``Decimal`` a str, ...).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

import msgspec

__all__ = ["UNRESOLVED", "Hints", "MismatchError", "changed", "convert", "describe", "hints"]

UNRESOLVED: Any = object()
"""The annotation of a parameter whose annotation names something not in scope
(a class local to a function, under ``from __future__ import annotations``):
its value is taken as it decodes, and no check is made of it."""


class Hints(NamedTuple):
    """A function's annotations, as the codec reads them."""

    positional: tuple[tuple[str, Any], ...]
    """(name, annotation) of each parameter that takes a positional argument."""
    by_name: Mapping[str, Any]
    """The annotation of each parameter, by name."""
    result: Any
    """The return annotation."""
    star_args: Any | None
    """The annotation of ``*args`` (of each extra positional), if the function has one."""


class MismatchError(ValueError):
    """A value that does not validate as its annotation (the message says why)."""


def _resolve(fn: Callable[..., Any], raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    namespace = getattr(inspect.unwrap(fn), "__globals__", {})
    try:
        return eval(raw, dict(namespace), {})  # an annotation, as get_type_hints reads it
    except Exception:
        return UNRESOLVED


@lru_cache(maxsize=1024)
def hints(fn: Callable[..., Any]) -> Hints:
    """``fn``'s annotations: an unresolvable one is ``UNRESOLVED``, a missing one ``Any``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return Hints((), {}, Any, Any)
    try:
        resolved: dict[str, Any] = typing.get_type_hints(fn)
    except Exception:  # a name out of scope: resolve each annotation alone
        raw = inspect.get_annotations(inspect.unwrap(fn))
        resolved = {name: _resolve(fn, value) for name, value in raw.items()}
    positional = tuple(
        (p.name, resolved.get(p.name, Any))
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
    star = next((resolved.get(p.name, Any) for p in params if p.kind is p.VAR_POSITIONAL), None)
    by_name = {p.name: resolved.get(p.name, Any) for p in params}
    return Hints(positional, by_name, resolved.get("return", Any), star)


def _is_model(annotation: Any) -> bool:
    return callable(getattr(annotation, "model_validate", None)) and "pydantic" in sys.modules


def _build_other(annotation: Any, value: Any) -> Any:
    """msgspec's hook for types it cannot build: a Pydantic model validates its dump,
    and anything else nothing can build (``object``, a Protocol, ...) is the value as is."""
    if _is_model(annotation):
        return annotation.model_validate(value)
    return value


def convert(value: Any, annotation: Any) -> Any:
    """``value`` (as it decodes) converted to ``annotation``.

    Raises:
        MismatchError: the value does not validate as the annotation.
    """
    if annotation is Any or annotation is UNRESOLVED:
        return value
    try:
        return msgspec.convert(value, annotation, strict=False, dec_hook=_build_other)
    except msgspec.ValidationError as exc:
        raise MismatchError(str(exc)) from None
    except TypeError:  # an annotation msgspec cannot use at all: taken as anything
        return value


def describe(annotation: Any) -> str:
    """A short name for ``annotation`` in a message (``Invoice``, ``list[int]``)."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def _plain(annotation: Any) -> bool:
    """True where the annotation takes the value as it decodes (no conversion)."""
    try:
        return _plain_cached(annotation)
    except TypeError:  # an unhashable annotation (``Annotated`` with a dict, ...)
        return _plain_uncached(annotation)


@lru_cache(maxsize=1024)
def _plain_cached(annotation: Any) -> bool:
    # msgspec.inspect.type_info builds the annotation's whole type tree: asked once each.
    return _plain_uncached(annotation)


def _plain_uncached(annotation: Any) -> bool:
    if annotation is UNRESOLVED:
        return False
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(_plain(member) for member in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _plain(typing.get_args(annotation)[0])
    if _is_model(annotation):
        return False
    try:
        info = msgspec.inspect.type_info(annotation)
    except TypeError:  # msgspec cannot use it: ``convert`` takes the value as is
        return True
    return isinstance(info, (msgspec.inspect.AnyType, msgspec.inspect.CustomType))


def _what(value: Any) -> str:
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        return "a naive datetime"
    if isinstance(value, enum.Enum):
        return f"an Enum ({type(value).__qualname__})"
    if dataclasses.is_dataclass(value):
        return f"a dataclass ({type(value).__qualname__})"
    name = type(value).__qualname__
    return f"an {name}" if name[:1] in "aeioAEIO" else f"a {name}"


def _differs(value: Any, back: Any) -> tuple[str, str] | None:
    """Where ``back`` (``value`` decoded plainly) is not of ``value``'s types: what each was."""
    if type(value) is not type(back):
        return _what(value), type(back).__qualname__
    if isinstance(value, list):
        for item, item_back in zip(value, back, strict=False):
            if (found := _differs(item, item_back)) is not None:
                return found
    elif isinstance(value, dict):
        for (key, item), (key_back, item_back) in zip(value.items(), back.items(), strict=False):
            if (found := _differs(key, key_back) or _differs(item, item_back)) is not None:
                return found
    return None


def changed(value: Any, back: Any, annotation: Any) -> tuple[str, str] | None:
    """Where ``value`` would not come back as itself: (what it is, what it comes back as).

    ``back`` is ``value`` recorded and decoded as ``annotation``. Only the parts
    the annotation takes plainly are compared: an annotated part comes back as
    its annotation says, which is the point of annotating it.
    """
    if _plain(annotation):
        return _differs(value, back)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return changed(value, back, args[0])
    if not args or type(back) is not origin:
        return None
    if origin in (list, set, frozenset) or (origin is tuple and args[-1:] == (...,)):
        for item, item_back in zip(value, back, strict=False):
            if (found := changed(item, item_back, args[0])) is not None:
                return found
    elif origin is tuple:
        for item, item_back, each in zip(value, back, args, strict=False):
            if (found := changed(item, item_back, each)) is not None:
                return found
    elif origin is dict and isinstance(value, dict) and len(args) == 2:
        for item, item_back in zip(value.values(), back.values(), strict=False):
            if (found := changed(item, item_back, args[1])) is not None:
                return found
    return None
