"""JSON Schema (draft 2020-12) from Python type hints, for tool parameters.

Supported: str, int, float, bool, None, Any and object; X | None and other
unions; list[X], Sequence[X], tuple[X, ...] and fixed tuples; dict[str, X] and
Mapping[str, X]; Literal[...]; Enum subclasses whose values are JSON scalars;
dataclasses and TypedDicts (their fields, required unless they have a
default); NewType; Annotated[X, ...] (as X); and, where pydantic is installed,
its models, through the model's own schema (its ``$defs`` moved to the root
of the parameters schema, where its references point). Anything else is
refused with the reason.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import math
import sys
import types
import typing
from typing import Any

from . import _docstring

_SEQUENCES: frozenset[Any] = frozenset(
    {
        list,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Iterable,
        collections.abc.Collection,
    }
)
_MAPPINGS: frozenset[Any] = frozenset(
    {dict, collections.abc.Mapping, collections.abc.MutableMapping}
)
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}
_SUPPORTED = (
    "str, int, float, bool, None, Any, unions, list/Sequence/tuple, dict/Mapping with str keys, "
    "Literal, Enum, dataclasses, TypedDict, NewType, Annotated, pydantic models"
)


class SchemaError(Exception):
    """A type that has no schema here; the message says why."""


def json_scalar_type(value: object) -> str | None:
    """The JSON Schema type of a scalar that JSON can carry, else None."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else None
    if isinstance(value, str):
        return "string"
    return None


def json_default(value: object) -> tuple[bool, Any]:
    """Whether a parameter's default can be written into a schema, and as what
    (an Enum member as its value; tuples as lists)."""
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False, None
    return True, json.loads(text)


class Builder:
    """Builds the schemas of one tool's parameters, gathering the ``$defs``
    that pydantic models bring."""

    def __init__(self, injected: tuple[type, ...] = ()) -> None:
        self.defs: dict[str, Any] = {}
        self._open: list[object] = []
        self._injected = injected

    def schema(self, tp: Any) -> dict[str, Any]:
        """The schema of values of type tp."""
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)

        if origin is typing.Annotated:
            return self.schema(args[0])
        if tp is Any or tp is object:
            return {}
        if _among(tp, frozenset(self._injected)):
            raise SchemaError(
                f"{_name(tp)} is filled in by the executor, as a parameter of its own: it is "
                "no argument, nor part of one"
            )
        if tp is None or tp is type(None):
            return {"type": "null"}
        if isinstance(tp, type) and tp in _SIMPLE:
            return {"type": _SIMPLE[tp]}
        if isinstance(tp, typing.NewType):
            return self.schema(tp.__supertype__)
        if origin is typing.Literal:
            return self._enum([a.value if isinstance(a, enum.Enum) else a for a in args], tp)
        if origin is typing.Union or origin is types.UnionType:
            return self._union(args)
        if is_sequence(tp, origin):
            if not args:
                return {"type": "array"}
            return {"type": "array", "items": self.schema(args[0])}
        if tp is tuple or origin is tuple:
            return self._tuple(args)
        if is_mapping(tp, origin):
            if not args:
                return {"type": "object"}
            key, value = args
            if key is not str:
                raise SchemaError(
                    f"{_name(tp)}: a JSON object's member names are str, not {_name(key)}"
                )
            return {"type": "object", "additionalProperties": self.schema(value)}
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self._enum([m.value for m in tp], tp)
        if isinstance(tp, type) and is_pydantic_model(tp):
            return self._pydantic(tp)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self._record(tp, dataclass_fields(tp), tp.__doc__)
        if isinstance(tp, type) and typing.is_typeddict(tp):
            return self._record(tp, typeddict_fields(tp), tp.__doc__)
        if isinstance(tp, typing.TypeVar):
            raise SchemaError(
                f"type variable {tp} has no schema: give the parameter a concrete type"
            )
        raise SchemaError(f"{_name(tp)} has no JSON Schema here (supported: {_SUPPORTED})")

    def _enum(self, values: list[Any], tp: Any) -> dict[str, Any]:
        if not values:
            raise SchemaError(f"{_name(tp)} has no values")
        kinds = []
        for v in values:
            kind = json_scalar_type(v)
            if kind is None:
                raise SchemaError(
                    f"{_name(tp)}: the value {v!r} is not a JSON string, number, bool or null"
                )
            kinds.append(kind)
        out: dict[str, Any] = {}
        if len(set(kinds)) == 1:
            out["type"] = kinds[0]
        out["enum"] = list(values)
        return out

    def _union(self, args: tuple[Any, ...]) -> dict[str, Any]:
        schemas: list[dict[str, Any]] = []
        for a in args:
            s = self.schema(a)
            if s not in schemas:
                schemas.append(s)
        if all(set(s) == {"type"} and isinstance(s["type"], str) for s in schemas):
            return {"type": [s["type"] for s in schemas]}
        return {"anyOf": schemas}

    def _tuple(self, args: tuple[Any, ...]) -> dict[str, Any]:
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": self.schema(args[0])}
        if args == ((),):  # tuple[()]
            return {"type": "array", "maxItems": 0}
        return {
            "type": "array",
            "prefixItems": [self.schema(a) for a in args],
            "items": False,
            "minItems": len(args),
            "maxItems": len(args),
        }

    def _record(
        self, tp: type, fields: list[tuple[str, Any, bool, object]], doc: str | None
    ) -> dict[str, Any]:
        if tp in self._open:
            raise SchemaError(f"{_name(tp)} refers to itself, which an inline schema cannot say")
        self._open.append(tp)
        try:
            parsed = _docstring.parse(
                doc if doc and not doc.startswith(f"{tp.__name__}(") else None
            )
            properties: dict[str, Any] = {}
            required: list[str] = []
            for name, hint, has_default, default in fields:
                try:
                    prop = self.schema(hint)
                except SchemaError as e:
                    raise SchemaError(f"{_name(tp)}.{name}: {e}") from None
                if name in parsed.attributes:
                    prop = {**prop, "description": parsed.attributes[name]}
                if has_default:
                    ok, value = json_default(default)
                    if ok:
                        prop = {**prop, "default": value}
                else:
                    required.append(name)
                properties[name] = prop
            out: dict[str, Any] = {"type": "object"}
            if parsed.summary:
                out["description"] = parsed.summary
            out["properties"] = properties
            if required:
                out["required"] = required
            out["additionalProperties"] = False
            return out
        finally:
            self._open.pop()

    def _pydantic(self, tp: type) -> dict[str, Any]:
        schema = dict(typing.cast(Any, tp).model_json_schema())
        for name, definition in schema.pop("$defs", {}).items():
            if name in self.defs and self.defs[name] != definition:
                raise SchemaError(
                    f"two pydantic models define {name!r} differently: rename one of them"
                )
            self.defs[name] = definition
        return schema


def _among(tp: Any, kinds: frozenset[Any]) -> bool:
    try:
        return tp in kinds
    except TypeError:  # unhashable: no type of these
        return False


def is_sequence(tp: Any, origin: Any) -> bool:
    """Whether a type (origin: its typing.get_origin) is one of the sequences
    that are JSON arrays: list, Sequence, Iterable and the like (tuples apart)."""
    return _among(tp, _SEQUENCES) or _among(origin, _SEQUENCES)


def is_mapping(tp: Any, origin: Any) -> bool:
    """Whether a type is one of the mappings that are JSON objects."""
    return _among(tp, _MAPPINGS) or _among(origin, _MAPPINGS)


def _name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return repr(tp).removeprefix("typing.")


def is_pydantic_model(tp: type) -> bool:
    pydantic = sys.modules.get("pydantic")
    if pydantic is None:
        return False  # a model would have imported it
    base = getattr(pydantic, "BaseModel", None)
    return isinstance(base, type) and issubclass(tp, base)


def dataclass_fields(tp: type) -> list[tuple[str, Any, bool, object]]:
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as e:  # a forward reference that does not resolve, and the like
        raise SchemaError(f"the type hints of {_name(tp)} cannot be resolved: {e}") from None
    out: list[tuple[str, Any, bool, object]] = []
    for f in dataclasses.fields(tp):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING or (
            f.default_factory is not dataclasses.MISSING
        )
        default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
        out.append((f.name, hints.get(f.name, Any), has_default, default))
    return out


def typeddict_fields(tp: type) -> list[tuple[str, Any, bool, object]]:
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as e:
        raise SchemaError(f"the type hints of {_name(tp)} cannot be resolved: {e}") from None
    required = getattr(tp, "__required_keys__", frozenset(hints))
    out: list[tuple[str, Any, bool, object]] = []
    for name, hint in hints.items():
        inner = hint
        # Required[...] and NotRequired[...] say what __required_keys__ says already.
        if typing.get_origin(inner) in (typing.Required, typing.NotRequired):
            inner = typing.get_args(inner)[0]
        out.append((name, inner, name not in required, dataclasses.MISSING))
    return out
