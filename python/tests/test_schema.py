"""Parameter schemas from type hints: a table of hints and the JSON Schema
each becomes, the types refused, and every schema checked against the draft
2020-12 meta-schema."""

import collections.abc
import dataclasses
import enum
import typing
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, TypedDict, Union

import jsonschema
import pydantic
import pytest

from toolexec import DeclarationError, ToolContext, tool


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Mixed(enum.Enum):
    A = "a"
    ONE = 1


@dataclasses.dataclass
class Leg:
    """One flight of a trip.

    Attributes:
        flight: Flight number.
        seats: How many seats.
    """

    flight: str
    seats: int = 1
    tags: list[str] = dataclasses.field(default_factory=list)
    note: str = dataclasses.field(default="", init=False)


@dataclasses.dataclass
class Bare:
    x: float


class Passenger(TypedDict):
    name: str
    age: NotRequired[int]


UserId = NewType("UserId", str)


class Address(pydantic.BaseModel):
    """Where to send the tickets."""

    city: str
    zip: str | None = None


class Booking(pydantic.BaseModel):
    address: Address
    seats: int = pydantic.Field(ge=1, description="How many seats.")


@dataclasses.dataclass
class Node:
    children: list["Node"]


T = typing.TypeVar("T")

LEG: dict[str, Any] = {
    "type": "object",
    "description": "One flight of a trip.",
    "properties": {
        "flight": {"type": "string", "description": "Flight number."},
        "seats": {"type": "integer", "description": "How many seats.", "default": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["flight"],
    "additionalProperties": False,
}

TABLE: list[tuple[Any, dict[str, Any]]] = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (type(None), {"type": "null"}),
    (Any, {}),
    (object, {}),
    (Optional[str], {"type": ["string", "null"]}),  # noqa: UP045 - the spelling is the point
    (str | None, {"type": ["string", "null"]}),
    (Union[int, str], {"type": ["integer", "string"]}),  # noqa: UP007
    (
        int | list[int],
        {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}}]},
    ),
    (list[str], {"type": "array", "items": {"type": "string"}}),
    (list, {"type": "array"}),
    (typing.List[int], {"type": "array", "items": {"type": "integer"}}),  # noqa: UP006
    (collections.abc.Sequence[bool], {"type": "array", "items": {"type": "boolean"}}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (
        tuple[str, int],
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer"}],
            "items": False,
            "minItems": 2,
            "maxItems": 2,
        },
    ),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict, {"type": "object"}),
    (collections.abc.Mapping[str, Any], {"type": "object", "additionalProperties": {}}),
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
    (Literal[1, "a", None], {"enum": [1, "a", None]}),
    (Literal[True], {"type": "boolean", "enum": [True]}),
    (Literal[Colour.RED], {"type": "string", "enum": ["red"]}),
    (Colour, {"type": "string", "enum": ["red", "green"]}),
    (Level, {"type": "integer", "enum": [1, 3]}),
    (Mixed, {"enum": ["a", 1]}),
    (Annotated[int, "anything"], {"type": "integer"}),
    (UserId, {"type": "string"}),
    (Leg, LEG),
    (
        Bare,
        {
            "type": "object",
            "properties": {"x": {"type": "number"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    ),
    (
        Passenger,
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
    (list[Leg] | None, {"anyOf": [{"type": "array", "items": LEG}, {"type": "null"}]}),
]


def parameter_schema(hint: Any) -> dict[str, Any]:
    """The schema the parameter x of a tool gets for this hint."""

    def body(x: Any) -> None:
        del x

    body.__annotations__ = {"x": hint, "return": None}
    decl = tool(body).declaration()
    jsonschema.Draft202012Validator.check_schema(decl["parameters"])
    prop: dict[str, Any] = decl["parameters"]["properties"]["x"]
    return prop


@pytest.mark.parametrize(("hint", "schema"), TABLE, ids=[repr(t) for t, _ in TABLE])
def test_hint_to_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert parameter_schema(hint) == schema


@pytest.mark.parametrize(
    ("hint", "why"),
    [
        (set[int], "set"),
        (bytes, "bytes"),
        (complex, "complex"),
        (dict[int, str], "member names are str, not int"),
        (Node, "refers to itself"),
        (T, "type variable"),
        (Literal[1.5j], "not a JSON string"),
        (list[ToolContext], "ToolContext"),
    ],
)
def test_hints_without_a_schema_are_refused(hint: Any, why: str) -> None:
    with pytest.raises(DeclarationError, match=why) as info:
        parameter_schema(hint)
    assert info.value.argument == "x"
    assert info.value.field == "parameters"


def test_pydantic_models_bring_their_own_schema() -> None:
    def reserve(booking: Booking, address: Address) -> None:
        """Reserve.

        Args:
            booking: The booking.
        """

    params = tool(reserve).declaration()["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    want_booking = Booking.model_json_schema()
    defs = want_booking.pop("$defs")
    assert params["properties"]["booking"] == {**want_booking, "description": "The booking."}
    assert params["properties"]["address"] == Address.model_json_schema()
    # The references the model's schema makes point at the root's $defs.
    assert params["$defs"] == defs
    validator = jsonschema.Draft202012Validator(params)
    good = {
        "booking": {"address": {"city": "Lisbon"}, "seats": 2},
        "address": {"city": "Porto", "zip": None},
    }
    assert list(validator.iter_errors(good)) == []
    bad = {"booking": {"address": {"zip": "x"}, "seats": 0}, "address": {"city": "Porto"}}
    assert len(list(validator.iter_errors(bad))) >= 2


def test_schema_validates_what_the_function_takes() -> None:
    def plan(leg: Leg, when: Literal["am", "pm"], extra: dict[str, int] | None = None) -> None:
        del leg, when, extra

    params = tool(plan).declaration()["parameters"]
    validator = jsonschema.Draft202012Validator(params)
    assert validator.is_valid({"leg": {"flight": "BA117"}, "when": "am"})
    assert not validator.is_valid({"leg": {"flight": "BA117"}, "when": "noon"})
    assert not validator.is_valid({"leg": {"seats": 1}, "when": "am"})  # flight is required
    assert not validator.is_valid({"leg": {"flight": "x"}, "when": "am", "other": 1})


NO_JSON = object()


def test_defaults_in_the_schema() -> None:
    def f(
        a: int = 3,
        b: str | None = None,
        c: Colour = Colour.GREEN,
        d: tuple[int, int] = (1, 2),
        e: Any = NO_JSON,
    ) -> None: ...

    props = tool(f).declaration()["parameters"]["properties"]
    assert props["a"]["default"] == 3
    assert props["b"]["default"] is None
    assert props["c"]["default"] == "green"
    assert props["d"]["default"] == [1, 2]
    assert "default" not in props["e"]  # no JSON form: left out
    assert "required" not in tool(f).declaration()["parameters"]
