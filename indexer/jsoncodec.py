"""Typed JSON for the indexer's stored state: dataclasses, dicts (any hashable keys), lists, tuples, scalars.

Why not pickle: an index folder is shared and downloaded, so reading it must never run code. Decoding
here is driven by the *expected* type's annotations, so a file can only ever produce the plain values
and dataclasses the caller asked for; anything else is a `CodecError`.

Dicts are stored as lists of `[key, value]` pairs, so tuple keys (e.g. entity pairs) survive.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any


class CodecError(ValueError):
    """The stored value does not have the expected shape."""


def encode(value: Any) -> Any:
    """A JSON-ready form of `value` (see `decode` for the way back)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return [[encode(k), encode(v)] for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise CodecError(f"cannot store a {type(value).__name__} value")


def decode(kind: Any, data: Any) -> Any:
    """Rebuild a value of type `kind` from `encode`'s output; raise `CodecError` on any mismatch."""
    if kind is Any:
        return data
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return decode(option, data)
            except CodecError:
                continue
        raise CodecError(f"{data!r:.60} matches none of {kind}")
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return _decode_dataclass(kind, data)
    if origin is dict:
        key_type, value_type = args or (Any, Any)
        if not isinstance(data, list) or not all(isinstance(p, list) and len(p) == 2 for p in data):
            raise CodecError(f"expected a list of [key, value] pairs for {kind}")
        return {decode(key_type, k): decode(value_type, v) for k, v in data}
    if origin in (list, tuple):
        if not isinstance(data, list):
            raise CodecError(f"expected a list for {kind}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise CodecError(f"expected {len(args)} items for {kind}, got {len(data)}")
            return tuple(decode(a, v) for a, v in zip(args, data, strict=True))
        item = args[0] if args else Any
        items = [decode(item, v) for v in data]
        return tuple(items) if origin is tuple else items
    return _decode_scalar(kind, data)


def _decode_dataclass(kind: type, data: Any) -> Any:
    if not isinstance(data, dict):
        raise CodecError(f"expected an object for {kind.__name__}")
    hints = typing.get_type_hints(kind)
    values = {}
    for f in dataclasses.fields(kind):
        if f.name in data:
            values[f.name] = decode(hints.get(f.name, Any), data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise CodecError(f"{kind.__name__}: missing field {f.name!r}")
    return kind(**values)


def _decode_scalar(kind: Any, data: Any) -> Any:
    if kind is None or kind is type(None):
        if data is None:
            return None
    elif kind is float:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data)
    elif kind is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif kind in (str, bool):
        if isinstance(data, kind):
            return data
    else:
        raise CodecError(f"unsupported stored type {kind}")
    raise CodecError(f"expected {getattr(kind, '__name__', kind)}, got {type(data).__name__}")
