"""Encoding of arguments, results and errors with msgspec (MessagePack).

Values are decoded against the function's annotations when it has them, so a
step returning a dataclass, a ``msgspec.Struct`` or a Pydantic model gives the
workflow that type back (on replay too), not a dict. Pydantic is optional: its
models are encoded with ``model_dump(mode="json")`` and validated back with the
model's ``model_validate`` (inside containers, dataclasses and Structs too),
only when the program uses Pydantic.
"""

from __future__ import annotations

import inspect
import sys
import traceback
import typing
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import msgspec

from worlds.types import ErrorInfo

__all__ = [
    "decode_call",
    "decode_headers",
    "decode_result",
    "encode_call",
    "encode_result",
    "error_info",
    "storable_text",
    "with_header",
]


def _encode_other(value: Any) -> Any:
    """What msgspec cannot encode itself: Pydantic models, as their JSON-mode dump."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and "pydantic" in sys.modules:
        return dump(mode="json")
    raise TypeError(f"{type(value).__qualname__} is not a type that can be recorded")


_encoder = msgspec.msgpack.Encoder(enc_hook=_encode_other)


def _encode(value: Any, what: str) -> bytes:
    try:
        return _encoder.encode(value)
    except (TypeError, msgspec.EncodeError, OverflowError) as exc:
        raise TypeError(f"{what} cannot be recorded: {exc}") from None
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise TypeError(
            f"{what} cannot be recorded: a str holds the lone surrogate {bad!r}, "
            "which is not Unicode text"
        ) from None


def encode_call(
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> bytes:
    """Encode a call's arguments; ``TypeError`` naming the type if one can't be.

    ``headers`` (text by text, such as a trace context) travel with the arguments
    and are read back by ``decode_headers``; the call never sees them.
    """
    if headers:
        return _encode([list(args), kwargs or {}, headers], "arguments")
    return _encode([list(args), kwargs or {}], "arguments")


def with_header(data: bytes, key: str, value: str) -> bytes:
    """``data`` (from ``encode_call``) with header ``key`` set to ``value``."""
    decoded = msgspec.msgpack.decode(data)
    headers = dict(decoded[2]) if len(decoded) > 2 else {}
    headers[key] = value
    return _encoder.encode([decoded[0], decoded[1], headers])


def decode_headers(data: bytes) -> dict[str, str]:
    """The headers ``encode_call`` recorded with a call, or an empty dict."""
    decoded = msgspec.msgpack.decode(data)
    if isinstance(decoded, list) and len(decoded) > 2 and isinstance(decoded[2], dict):
        return {str(k): str(v) for k, v in decoded[2].items()}
    return {}


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


def _decode_other(annotation: type, value: Any) -> Any:
    """What msgspec cannot build itself: a Pydantic model, validated from its dump."""
    validate = getattr(annotation, "model_validate", None)
    if callable(validate) and "pydantic" in sys.modules:
        return validate(value)
    raise NotImplementedError(f"{annotation!r} is not a type values can be decoded as")


def _convert(value: Any, annotation: Any) -> Any:
    if annotation is Any:
        return value
    try:
        return msgspec.convert(value, annotation, strict=False, dec_hook=_decode_other)
    except (msgspec.ValidationError, TypeError):
        return value


def decode_call(data: bytes, fn: Callable[..., Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Decode arguments recorded by ``encode_call`` as ``fn``'s parameter types."""
    raw_args, raw_kwargs = msgspec.msgpack.decode(data)[:2]
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
    """What to record about an exception (any text made storable by ``storable_text``)."""
    try:
        message = str(exc)
    except Exception as broken:  # an exception whose __str__ raises must still be recorded
        message = f"<str() of the {type(exc).__qualname__} raised {type(broken).__qualname__}>"
    try:
        trace = "".join(traceback.format_exception(exc))
    except Exception:
        trace = ""
    return ErrorInfo(
        type=type(exc).__qualname__, message=storable_text(message), traceback=storable_text(trace)
    )


def storable_text(text: str) -> str:
    """``text`` with each lone surrogate written as a ``\\udXXX`` escape, so every world stores it.

    An error message is recorded whatever it holds: refusing it would leave its
    run with nothing to record.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
