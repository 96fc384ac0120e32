"""Encoding of arguments, results and errors with msgspec (MessagePack).

Values are decoded against the function's annotations when it has them, so a
step returning a dataclass, a ``msgspec.Struct`` or a Pydantic model gives the
workflow that type back (on replay too), not a dict. Pydantic is optional: its
models are encoded with ``model_dump(mode="json")`` and validated back with the
model's ``model_validate`` (inside containers, dataclasses and Structs too),
only when the program uses Pydantic. What an annotation means is decided in
``workflow._annotations``; encoding checks each value the way it will be
decoded, so a value that would not come back (as its annotation, or as itself
where nothing is annotated) is refused when it is recorded, not when it is read.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol

import msgspec

from workflow._annotations import UNRESOLVED, MismatchError, changed, convert, describe, hints
from workflow.errors import UndecodableValueError
from worlds.codec import MARKER
from worlds.errors import CodecRequiredError
from worlds.types import ErrorInfo

__all__ = [
    "decode_call",
    "decode_headers",
    "decode_result",
    "encode_call",
    "encode_result",
    "encode_start",
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


_ROUND_TRIP_TYPES = frozenset({str, int, float, bool, type(None)})
"""Exact types whose values decode as themselves and validate as their own type."""


def _needs_no_check(value: Any, annotation: Any) -> bool:
    """True where ``value`` certainly comes back as itself and validates as ``annotation``.

    The common small argument or result (an ``int`` annotated ``int``, a ``str``
    with no annotation) is then recorded without decoding it again to check it:
    the hot path of every step and start.
    """
    kind = type(value)
    return kind in _ROUND_TRIP_TYPES and (
        annotation is kind or annotation is Any or annotation is UNRESOLVED
    )


def _check(value: Any, back: Any, annotation: Any, what: str) -> Any:
    """``back`` (``value`` recorded and decoded plainly) as ``annotation``; raise if ``value``
    does not validate as it, or would not come back as itself where it is taken plainly."""
    try:
        built = convert(back, annotation)
    except MismatchError as exc:
        raise UndecodableValueError(
            f"{what} does not validate as {describe(annotation)}: {exc}"
        ) from None
    found = changed(value, built, annotation)
    if found is not None:
        was, becomes = found
        raise TypeError(
            f"{what} holds {was}, which comes back as a {becomes} unless annotated: annotate "
            f"it with its type (tuple[int, ...], Decimal, a dataclass, ...) or pass a {becomes}"
        )
    return built


@lru_cache(maxsize=1024)
def _names(fn: Callable[..., Any] | None, count: int) -> tuple[tuple[str, Any], ...]:
    """The (name, annotation) of each of ``count`` positional arguments of ``fn``
    (asked for every call a run records or replays: built once per function and count)."""
    if fn is None:
        return tuple((f"argument {i + 1}", Any) for i in range(count))
    found = hints(fn)
    named = list(found.positional[:count])
    extra = Any if found.star_args is None else found.star_args
    named += [(f"argument {i + 1}", extra) for i in range(len(named), count)]
    return tuple(named)


def encode_call(
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    *,
    fn: Callable[..., Any] | None = None,
    owner: str = "the call",
) -> bytes:
    """Encode a call's arguments, checked against ``fn``'s annotations.

    ``headers`` (text by text, such as a trace context) travel with the arguments
    and are read back by ``decode_headers``; the call never sees them.

    Raises:
        UndecodableValueError: an argument does not validate as its annotation.
        TypeError: an argument cannot be recorded, or would not come back as
            itself (a tuple without an annotation, ...); the message names it.
    """
    kwargs = kwargs or {}
    if headers:
        data = _encode([list(args), kwargs, headers], "arguments")
    else:
        data = _encode([list(args), kwargs], "arguments")
    by_name = hints(fn).by_name if fn is not None and kwargs else {}
    named = _names(fn, len(args))
    positional = zip(named, args, strict=True)
    if all([_needs_no_check(value, annotation) for (_, annotation), value in positional]) and (
        not kwargs
        or all(_needs_no_check(value, by_name.get(name, Any)) for name, value in kwargs.items())
    ):
        return data
    back_args, back_kwargs = _unpack(data)[:2]
    for (name, annotation), value, back in zip(named, args, back_args, strict=True):
        _check(value, back, annotation, f"{_argument(name)} of {owner}")
    for name, value in kwargs.items():
        _check(value, back_kwargs[name], by_name.get(name, Any), f"{_argument(name)} of {owner}")
    return data


class _Workflow(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def fn(self) -> Callable[..., Any]: ...


def encode_start(
    workflow: _Workflow, args: tuple[Any, ...], headers: dict[str, str] | None = None
) -> bytes:
    """``encode_call`` of the arguments a run of ``workflow`` starts with (every start path)."""
    return encode_call(args, headers=headers, fn=workflow.fn, owner=f"workflow {workflow.name!r}")


def _unpack(data: bytes) -> Any:
    """Recorded ``data`` as MessagePack builtins.

    Raises:
        CodecRequiredError: a payload codec wrote it (``worlds.codec``), and it
            reached here without passing through one.
    """
    if data[:1] == MARKER:
        raise CodecRequiredError(
            "this payload was written through a payload codec and cannot be read without"
            " it: open the world through worlds.codec.CodecWorld with it"
        )
    return msgspec.msgpack.decode(data)


def _argument(name: str) -> str:
    return name if name.startswith("argument ") else f"argument {name!r}"


def with_header(data: bytes, key: str, value: str) -> bytes:
    """``data`` (from ``encode_call``) with header ``key`` set to ``value``."""
    decoded = _unpack(data)
    headers = dict(decoded[2]) if len(decoded) > 2 else {}
    headers[key] = value
    return _encoder.encode([decoded[0], decoded[1], headers])


def decode_headers(data: bytes) -> dict[str, str]:
    """The headers ``encode_call`` recorded with a call, or an empty dict."""
    decoded = _unpack(data)
    if isinstance(decoded, list) and len(decoded) > 2 and isinstance(decoded[2], dict):
        return {str(k): str(v) for k, v in decoded[2].items()}
    return {}


def encode_result(value: Any, what: str = "result", fn: Callable[..., Any] | None = None) -> bytes:
    """Encode a value (``fn``'s return value, if given), checked against its annotation.

    Raises:
        UndecodableValueError: it does not validate as ``fn``'s return annotation.
        TypeError: it cannot be recorded, or would not come back as itself.
    """
    data = _encode(value, what)
    annotation = hints(fn).result if fn is not None else Any
    if not _needs_no_check(value, annotation):
        _check(value, _unpack(data), annotation, what)
    return data


def _taken_as_is(value: Any, annotation: Any) -> bool:
    """True where decoding ``value`` as ``annotation`` gives ``value`` back: no annotation
    to convert to, or a plain value of exactly its annotated type (an ``int`` as ``int``),
    which ``convert`` would return as it is."""
    return (
        annotation is Any
        or annotation is UNRESOLVED
        or (type(value) is annotation and annotation in _ROUND_TRIP_TYPES)
    )


def _decode(value: Any, annotation: Any, what: str) -> Any:
    try:
        return convert(value, annotation)
    except MismatchError as exc:
        raise UndecodableValueError(
            f"the recorded {what} no longer validates as {describe(annotation)} "
            f"(was the annotation changed since it was recorded?): {exc}"
        ) from None


def _decode_argument(value: Any, annotation: Any, name: str, fn: Callable[..., Any]) -> Any:
    """``_decode`` of one argument of ``fn``; a value that decodes as itself is taken
    as it is, and the message naming the argument is made only for an error."""
    if _taken_as_is(value, annotation):
        return value
    owner = getattr(fn, "__qualname__", "the function")
    return _decode(value, annotation, f"{_argument(name)} of {owner!r}")


def decode_call(data: bytes, fn: Callable[..., Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Decode arguments recorded by ``encode_call`` as ``fn``'s parameter types.

    Raises:
        UndecodableValueError: a recorded argument no longer validates.
    """
    raw_args, raw_kwargs = _unpack(data)[:2]
    args = tuple(
        [
            _decode_argument(value, annotation, name, fn)
            for (name, annotation), value in zip(_names(fn, len(raw_args)), raw_args, strict=True)
        ]
    )
    if not raw_kwargs:
        return args, {}
    by_name = hints(fn).by_name
    kwargs = {
        name: _decode_argument(value, by_name.get(name, Any), name, fn)
        for name, value in raw_kwargs.items()
    }
    return args, kwargs


def decode_result(data: bytes, fn: Callable[..., Any] | None) -> Any:
    """Decode a value recorded by ``encode_result`` as ``fn``'s return type.

    Raises:
        UndecodableValueError: the recorded value no longer validates.
    """
    if fn is None:
        return _unpack(data)
    value, annotation = _unpack(data), hints(fn).result
    if _taken_as_is(value, annotation):
        return value
    owner = getattr(fn, "__qualname__", "the function")
    return _decode(value, annotation, f"result of {owner!r}")


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
