"""From a call's JSON arguments to the Python values a tool's type hints ask
for, for :class:`toolexec.Worker`.

The executor checks a call's arguments against the tool's schema, which
:mod:`toolexec._schema` derived from the same hints, before it sends the body
its request; what is left is to turn the JSON values back into the types the
hints name, and nothing more (no coercion of a string into a number, say):

* ``Annotated[X, ...]`` and a ``NewType`` of X: as X; ``Any`` and ``object``:
  the JSON value as it is;
* ``str``, ``bool`` and ``None``: the value, which must be of that type;
  ``int``: an integer (or a number without a fraction, such as ``2.0``);
  ``float``: any number;
* ``Literal[...]``: the value, which must be one of them (an Enum member when
  the literal is one); an ``Enum`` subclass: the member whose value it is;
* ``list[X]``, ``Sequence[X]`` and the other sequences: a list; ``tuple[X,
  ...]`` and fixed tuples: a tuple; ``dict[str, X]`` and ``Mapping[str, X]``:
  a dict; each item converted as X;
* a dataclass: an instance, made with its fields converted (a field it does
  not have, or a required one missing, is refused); a ``TypedDict``: a dict,
  its fields converted; a pydantic model: ``Model.model_validate(value)``;
* a union (``X | Y``, ``Optional[X]``): the first of its members, in the
  order written, that the value converts to.

What does not convert raises :class:`ConversionError`: the body is not
entered, and the worker says so with ``no_effect``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import _schema


class ConversionError(Exception):
    """A value that is not what the type hint asks for; the message says where."""


def _same(a: object, b: object) -> bool:
    """Whether two JSON scalars are one value: equal, and of one JSON type (a
    bool is never a number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__qualname__


def convert(tp: Any, value: Any, where: str) -> Any:
    """value (a JSON value, as json.loads gives it) as the type tp asks for;
    where names it in errors, such as ``legs[2].date``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)

    if origin is typing.Annotated:
        return convert(args[0], value, where)
    if tp is Any or tp is object:
        return value
    if tp is None or tp is type(None):
        if value is not None:
            raise ConversionError(f"{where}: want null, not {_kind(value)}")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConversionError(f"{where}: want a boolean, not {_kind(value)}")
        return value
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConversionError(f"{where}: want an integer, not {_kind(value)}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConversionError(f"{where}: want a number, not {_kind(value)}")
    if tp is str:
        if not isinstance(value, str):
            raise ConversionError(f"{where}: want a string, not {_kind(value)}")
        return value
    if isinstance(tp, typing.NewType):
        return convert(tp.__supertype__, value, where)
    if origin is typing.Literal:
        for choice in args:
            literal = choice.value if isinstance(choice, enum.Enum) else choice
            if _same(literal, value):
                return choice
        raise ConversionError(f"{where}: {value!r} is not one of {list(args)!r}")
    if origin is typing.Union or origin is types.UnionType:
        return _union(args, value, where)
    if _schema.is_sequence(tp, origin):
        if not isinstance(value, list):
            raise ConversionError(f"{where}: want an array, not {_kind(value)}")
        item = args[0] if args else Any
        return [convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if tp is tuple or origin is tuple:
        return _tuple(args, value, where)
    if _schema.is_mapping(tp, origin):
        if not isinstance(value, dict):
            raise ConversionError(f"{where}: want an object, not {_kind(value)}")
        item = args[1] if args else Any
        return {k: convert(item, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if _same(member.value, value):
                return member
        raise ConversionError(f"{where}: {value!r} is not a value of {tp.__qualname__}")
    if isinstance(tp, type) and _schema.is_pydantic_model(tp):
        try:
            return typing.cast(Any, tp).model_validate(value)
        except Exception as e:  # pydantic's ValidationError, or a validator's own
            raise ConversionError(f"{where}: not a {tp.__qualname__}: {e}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record(tp, _schema.dataclass_fields(tp), value, where, make=tp)
    if isinstance(tp, type) and typing.is_typeddict(tp):
        return _record(tp, _schema.typeddict_fields(tp), value, where, make=dict)
    # A type the schema builder refuses never reaches here; anything else
    # (a type it learns later) gets the JSON value as it is.
    return value


def _union(args: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None and (type(None) in args or None in args):
        return None
    reasons = []
    for member in args:
        if member is None or member is type(None):
            continue
        try:
            return convert(member, value, where)
        except ConversionError as e:
            reasons.append(str(e).removeprefix(f"{where}: "))
    raise ConversionError(f"{where}: no member of the union takes it ({'; '.join(reasons)})")


def _tuple(args: tuple[Any, ...], value: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(value, list):
        raise ConversionError(f"{where}: want an array, not {_kind(value)}")
    if not args:
        return tuple(value)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if args == ((),):
        args = ()
    if len(value) != len(args):
        raise ConversionError(f"{where}: want {len(args)} items, not {len(value)}")
    pairs = enumerate(zip(args, value, strict=True))
    return tuple(convert(a, v, f"{where}[{i}]") for i, (a, v) in pairs)


def _record(
    tp: type,
    fields: list[tuple[str, Any, bool, object]],
    value: Any,
    where: str,
    *,
    make: Callable[..., Any],
) -> Any:
    if not isinstance(value, dict):
        raise ConversionError(f"{where}: want an object ({tp.__qualname__}), not {_kind(value)}")
    known = {name for name, _, _, _ in fields}
    for name in value:
        if name not in known:
            raise ConversionError(f"{where}: {tp.__qualname__} has no field {name!r}")
    out: dict[str, Any] = {}
    for name, hint, has_default, _ in fields:
        if name in value:
            out[name] = convert(hint, value[name], f"{where}.{name}")
        elif not has_default:
            raise ConversionError(f"{where}: the field {name!r} of {tp.__qualname__} is missing")
    try:
        return make(**out)
    except (TypeError, ValueError) as e:  # a __post_init__ that refuses the values
        raise ConversionError(f"{where}: {tp.__qualname__}: {e}") from None


@dataclass(frozen=True, slots=True)
class Parameter:
    """One argument of a tool, as its body takes it."""

    name: str
    hint: Any
    required: bool


@dataclass(frozen=True, slots=True)
class Binding:
    """How a tool's body takes a call's arguments: its parameters (the
    ToolContext one apart), each with its type hint."""

    parameters: tuple[Parameter, ...]
    context: str | None

    def arguments(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of the body for a call's arguments object,
        the context parameter left out; ConversionError for an argument the
        body has not, a required one missing, or a value that does not
        convert."""
        names = {p.name for p in self.parameters}
        for name in args:
            if name not in names:
                raise ConversionError(f"{name}: the tool has no such parameter")
        out: dict[str, Any] = {}
        for p in self.parameters:
            if p.name in args:
                out[p.name] = convert(p.hint, args[p.name], p.name)
            elif p.required:
                raise ConversionError(f"{p.name}: a required argument is missing")
        return out


def bind(fn: Callable[..., Any], context: str | None) -> Binding:
    """The Binding of a tool's function, whose ToolContext parameter (if any)
    is named context. The function was declared with @tool, which resolved
    the same hints already."""
    hints = typing.get_type_hints(fn, include_extras=True)
    params = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == context:
            continue
        params.append(
            Parameter(name=p.name, hint=hints.get(p.name, Any), required=p.default is p.empty)
        )
    return Binding(parameters=tuple(params), context=context)
