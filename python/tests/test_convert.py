"""The worker's conversion of a call's JSON arguments to the types of the
body's parameters (toolexec._convert): each kind of hint the schema builder
supports, and what does not convert."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NewType, TypedDict

import pydantic
import pytest

from toolexec import ToolContext, tool
from toolexec._convert import ConversionError, bind, convert


class Cabin(enum.Enum):
    ECONOMY = "economy"
    BUSINESS = "business"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Leg:
    """One flight of a trip.

    Attributes:
        flight: Flight number.
        cabin: Where to sit.
    """

    flight: str
    cabin: Cabin = Cabin.ECONOMY


@dataclasses.dataclass
class Trip:
    legs: list[Leg]
    note: str | None = None


class Passenger(TypedDict):
    name: str
    age: int


class Seat(pydantic.BaseModel):
    row: int
    letter: Literal["A", "B", "C"]


PNR = NewType("PNR", str)


@pytest.mark.parametrize(
    ("hint", "value", "want"),
    [
        (str, "x", "x"),
        (int, 3, 3),
        (int, 3.0, 3),
        (float, 3, 3.0),
        (float, 2.5, 2.5),
        (bool, True, True),
        (None, None, None),
        (Any, {"a": [1]}, {"a": [1]}),
        (object, "x", "x"),
        (PNR, "ABC123", "ABC123"),
        (Annotated[int, "a count"], 4, 4),
        (Literal["aisle", "window"], "window", "window"),
        (Literal[1, 2], 2, 2),
        (Literal[Cabin.BUSINESS], "business", Cabin.BUSINESS),
        (Cabin, "business", Cabin.BUSINESS),
        (Level, 2, Level.HIGH),
        (list[int], [1, 2.0], [1, 2]),
        (Sequence[Cabin], ["economy"], [Cabin.ECONOMY]),
        (tuple[int, ...], [1, 2], (1, 2)),
        (tuple[int, str], [1, "a"], (1, "a")),
        (tuple[()], [], ()),
        (dict[str, Cabin], {"a": "economy"}, {"a": Cabin.ECONOMY}),
        (Mapping[str, list[int]], {"a": [1]}, {"a": [1]}),
        (int | None, None, None),
        (int | None, 5, 5),
        (int | str, "5", "5"),
        (str | int, 5, 5),
        (Cabin | int, 3, 3),
        (Leg, {"flight": "BA1"}, Leg("BA1")),
        (Leg, {"flight": "BA1", "cabin": "business"}, Leg("BA1", Cabin.BUSINESS)),
        (
            Trip,
            {"legs": [{"flight": "BA1"}, {"flight": "LH2", "cabin": "business"}]},
            Trip([Leg("BA1"), Leg("LH2", Cabin.BUSINESS)]),
        ),
        (Passenger, {"name": "Ada", "age": 36.0}, {"name": "Ada", "age": 36}),
        (Seat, {"row": 3, "letter": "B"}, Seat(row=3, letter="B")),
        (list[Seat], [{"row": 1, "letter": "A"}], [Seat(row=1, letter="A")]),
    ],
)
def test_converts(hint: Any, value: Any, want: Any) -> None:
    got = convert(hint, value, "x")
    assert got == want
    assert type(got) is type(want)


def test_nested_types_are_what_the_hints_say() -> None:
    trip = convert(Trip, {"legs": [{"flight": "BA1", "cabin": "business"}]}, "trip")
    assert isinstance(trip, Trip)
    assert isinstance(trip.legs[0], Leg)
    assert trip.legs[0].cabin is Cabin.BUSINESS


@pytest.mark.parametrize(
    ("hint", "value", "message"),
    [
        (str, 1, "x: want a string, not a number"),
        (int, "1", "x: want an integer, not a string"),
        (int, 1.5, "x: want an integer"),
        (int, True, "x: want an integer, not a boolean"),
        (float, False, "x: want a number, not a boolean"),
        (bool, 1, "x: want a boolean, not a number"),
        (None, 0, "x: want null"),
        (Literal["a"], "b", "x: 'b' is not one of"),
        (Literal[1], True, "is not one of"),
        (Cabin, "first", "x: 'first' is not a value of Cabin"),
        (Level, True, "is not a value of Level"),
        (list[int], {"a": 1}, "x: want an array, not an object"),
        (list[int], [1, "2"], r"x\[1\]: want an integer"),
        (tuple[int, str], [1], "x: want 2 items, not 1"),
        (dict[str, int], [], "x: want an object, not an array"),
        (int | None, "a", "x: no member of the union takes it"),
        (Leg, {"flight": "BA1", "seat": "1A"}, "x: Leg has no field 'seat'"),
        (Leg, {}, "x: the field 'flight' of Leg is missing"),
        (Leg, {"flight": "BA1", "cabin": "first"}, r"x\.cabin: 'first' is not a value"),
        (Passenger, {"name": "Ada"}, "the field 'age' of Passenger is missing"),
        (Seat, {"row": 1, "letter": "Z"}, "x: not a Seat"),
    ],
)
def test_refuses(hint: Any, value: Any, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        convert(hint, value, "x")


def test_a_dataclass_that_refuses_its_values() -> None:
    @dataclasses.dataclass
    class Positive:
        n: int

        def __post_init__(self) -> None:
            if self.n <= 0:
                raise ValueError("n must be positive")

    with pytest.raises(ConversionError, match="n must be positive"):
        convert(Positive, {"n": 0}, "x")


def test_binding_a_tool() -> None:
    @tool
    async def book(ctx: ToolContext, flight: str, legs: list[Leg], seats: int = 1) -> str:
        """Book."""
        return ""

    binding = bind(book.fn, book.context_parameter)
    assert binding.context == "ctx"
    assert [(p.name, p.required) for p in binding.parameters] == [
        ("flight", True),
        ("legs", True),
        ("seats", False),
    ]
    args = json.loads('{"flight": "BA1", "legs": [{"flight": "BA1"}]}')
    assert binding.arguments(args) == {"flight": "BA1", "legs": [Leg("BA1")]}
    with pytest.raises(ConversionError, match="legs: a required argument is missing"):
        binding.arguments({"flight": "BA1"})
    with pytest.raises(ConversionError, match="ctx: the tool has no such parameter"):
        binding.arguments({"flight": "BA1", "legs": [], "ctx": {}})
