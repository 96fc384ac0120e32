"""Encoding of arguments, results and errors with msgspec (MessagePack).

Values are decoded against the function's annotations when it has them, so a
step returning a dataclass or ``msgspec.Struct`` gives the workflow that type
back on replay, not a dict.
"""

from __future__ import annotations

import inspect
import traceback
import typing
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import msgspec

from worlds.types import ErrorInfo

__all__ = [
    "decode_call",
    "decode_result",
    "encode_call",
    "encode_result",
    "error_info",
]

_encoder = msgspec.msgpack.Encoder()


def _encode(value: Any, what: str) -> bytes:
    try:
        return _encoder.encode(value)
    except (TypeError, msgspec.EncodeError, OverflowError) as exc:
        raise TypeError(f"{what} cannot be recorded: {exc}") from None


def encode_call(args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> bytes:
    """Encode a call's arguments; ``TypeError`` naming the type if one can't be."""
    return _encode([list(args), kwargs or {}], "arguments")


def encode_result(value: Any, what: str = "result") -> bytes:
    """Encode a return value; ``TypeError`` naming the type if it can't be."""
    return _encode(value, what)


@lru_cache(maxsize=1024)
def _hints(fn: Callable[..., Any]) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
    """(positional parameter types, all parameter types by name, return type)."""
    try:
        hints = typing.get_type_hints(fn)
        params = list(inspect.signature(fn).parameters.values())
    except (NameError, TypeError, ValueError):
        return (), {}, Any
    positional = tuple(
        hints.get(p.name, Any)
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
    by_name = {p.name: hints.get(p.name, Any) for p in params}
    return positional, by_name, hints.get("return", Any)


def _convert(value: Any, annotation: Any) -> Any:
    if annotation is Any:
        return value
    try:
        return msgspec.convert(value, annotation, strict=False)
    except (msgspec.ValidationError, TypeError):
        return value


def decode_call(data: bytes, fn: Callable[..., Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Decode arguments recorded by ``encode_call`` as ``fn``'s parameter types."""
    raw_args, raw_kwargs = msgspec.msgpack.decode(data)
    positional, by_name, _ = _hints(fn)
    args = tuple(
        _convert(value, positional[i] if i < len(positional) else Any)
        for i, value in enumerate(raw_args)
    )
    kwargs = {name: _convert(value, by_name.get(name, Any)) for name, value in raw_kwargs.items()}
    return args, kwargs


def decode_result(data: bytes, fn: Callable[..., Any] | None) -> Any:
    """Decode a value recorded by ``encode_result`` as ``fn``'s return type."""
    if fn is None:
        return msgspec.msgpack.decode(data)
    return _convert(msgspec.msgpack.decode(data), _hints(fn)[2])


def error_info(exc: BaseException) -> ErrorInfo:
    """What to record about an exception."""
    try:
        message = str(exc)
    except Exception as broken:  # an exception whose __str__ raises must still be recorded
        message = f"<str() of the {type(exc).__qualname__} raised {type(broken).__qualname__}>"
    try:
        trace = "".join(traceback.format_exception(exc))
    except Exception:
        trace = ""
    return ErrorInfo(type=type(exc).__qualname__, message=message, traceback=trace)
