"""@tool: its three forms on plain and async functions, the declaration it
builds and the catalog's shape of it, and the declarations it refuses."""

import asyncio
import dataclasses
import datetime
import json
import re
from typing import Annotated, Any

import pytest

from conftest import REPO
from toolexec import (
    DeclarationError,
    Idempotency,
    IdempotencyPolicy,
    Tool,
    ToolContext,
    UnknownArgumentError,
    tool,
)
from toolexec._docstring import parse as parse_docstring

CTX = ToolContext(
    tenant="acme", run_id="run_1", call_id="call_1", tool="book", idempotency_key="k1"
)


@tool(idempotency=IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flight",)))
async def book(flight: str, request_id: str, ctx: ToolContext) -> str:
    """Take one seat on a flight.

    The airline is told the call's key, so that it books once.

    Args:
        flight: Flight number, such as BA117.
        request_id: Drawn anew for each attempt, so it stays out of the key.
        ctx: Filled in by the executor.

    Returns:
        The booking's reference.
    """
    return f"{flight}/{request_id}/{ctx.idempotency_key}"


@tool(idempotency=IdempotencyPolicy(Idempotency.READ_ONLY))
def fare(flight: str) -> str:
    """Read a flight's current fare.

    Args:
        flight: Flight number.
    """
    return f"fare of {flight}"


@tool
def ping() -> str:
    """Say pong."""
    return "pong"


@tool()
async def wait(seconds: float = 0.0) -> float:
    return seconds


def test_decorated_functions_are_still_the_functions() -> None:
    assert asyncio.run(book("BA117", "r1", CTX)) == "BA117/r1/k1"
    assert asyncio.run(book(flight="BA117", request_id="r2", ctx=CTX)) == "BA117/r2/k1"
    assert fare("BA117") == "fare of BA117"
    assert ping() == "pong"
    assert asyncio.run(wait(0.5)) == 0.5
    assert book.is_async
    assert wait.is_async
    assert not fare.is_async
    assert not ping.is_async
    # What functools.wraps would give: the name, the docstring, the function.
    assert book.__name__ == "book"
    assert book.__doc__ is not None
    assert book.__doc__.startswith("Take one seat")
    assert fare.__wrapped__ is fare.fn
    for t in (book, fare, ping, wait):
        assert isinstance(t, Tool)


def test_the_seed_forms_declare_what_they_say() -> None:
    assert book.declaration() == {
        "name": "book",
        "description": "Take one seat on a flight.",
        "parameters": {
            "type": "object",
            "properties": {
                "flight": {"type": "string", "description": "Flight number, such as BA117."},
                "request_id": {
                    "type": "string",
                    "description": "Drawn anew for each attempt, so it stays out of the key.",
                },
            },
            "required": ["flight", "request_id"],
            "additionalProperties": False,
        },
        "kind": "effectful",
        "key_arguments": ["flight"],
    }
    assert book.context_parameter == "ctx"
    assert book.arguments == ("flight", "request_id")
    assert book.required == ("flight", "request_id")
    assert fare.declaration()["kind"] == "read_only"
    assert "key_arguments" not in fare.declaration()  # every argument
    assert ping.declaration() == {
        "name": "ping",
        "description": "Say pong.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    }
    assert wait.declaration() == {
        "name": "wait",
        "parameters": {
            "type": "object",
            "properties": {"seconds": {"type": "number", "default": 0.0}},
            "additionalProperties": False,
        },
    }


def test_a_tool_without_idempotency_has_no_kind() -> None:
    for t in (ping, wait):
        assert t.policy is None
        d = t.declaration()
        assert "kind" not in d
        assert "key_arguments" not in d
        assert "check_arguments" not in d


def test_every_option() -> None:
    @tool(
        idempotency=IdempotencyPolicy(
            Idempotency.IDEMPOTENT, key_arguments=(), check_arguments=["seats"]
        ),
        name="set-seats",
        description="Set the seat count.",
        timeout=datetime.timedelta(seconds=2.5),
    )
    def set_seats(booking: str, seats: int) -> None:
        """Ignored: the description given wins."""

    d = set_seats.declaration()
    assert d["name"] == "set-seats"
    assert d["description"] == "Set the seat count."
    assert d["kind"] == "idempotent"
    assert d["key_arguments"] == []  # none: the key is the tenant, run and tool
    assert d["check_arguments"] == ["seats"]
    assert d["timeout_ms"] == 2500
    assert set_seats.timeout == 2.5
    assert list(d) == [
        "name",
        "description",
        "parameters",
        "kind",
        "key_arguments",
        "check_arguments",
        "timeout_ms",
    ]
    # An Idempotency alone is a policy whose key is every argument.
    quick = tool(idempotency=Idempotency.IDEMPOTENT, timeout=0.29, name="quick")(lambda x: x)
    assert quick.policy == IdempotencyPolicy(Idempotency.IDEMPOTENT)
    assert quick.declaration()["timeout_ms"] == 290


def test_declaration_is_json_and_a_copy() -> None:
    d = book.declaration()
    assert json.loads(json.dumps(d)) == d
    d["parameters"]["properties"].clear()
    d["key_arguments"].append("x")
    assert book.declaration()["parameters"]["properties"]
    assert book.declaration()["key_arguments"] == ["flight"]


def test_declaration_has_the_catalogs_members() -> None:
    # docs/PROTOCOL.md §8, as the Go side's catalog declares a tool
    # (bus.ToolDecl): the same member names and nothing else.
    src = (REPO / "bus" / "catalog.go").read_text()
    body = src[src.index("type ToolDecl struct") :]
    body = body[: body.index("\n}\n")]
    go_members = re.findall(r'json:"([a-z_]+)', body)
    assert go_members == [
        "name",
        "description",
        "parameters",
        "kind",
        "key_arguments",
        "check_arguments",
        "timeout_ms",
        "unavailable",
    ]
    # What a worker declares: every member but the catalog's own mark of a
    # tool whose server cannot be reached.
    declared = [m for m in go_members if m != "unavailable"]

    @tool(
        idempotency=IdempotencyPolicy("effectful", key_arguments=["a"], check_arguments=["b"]),
        timeout=1,
    )
    def full(a: int, b: int) -> None:
        """Everything."""

    assert list(full.declaration()) == declared
    for t in (book, fare, ping, wait, full):
        assert set(t.declaration()) <= set(declared)


def test_key_and_check_arguments_must_be_parameters() -> None:
    def body(flight: str, seats: int, ctx: ToolContext) -> None: ...

    with pytest.raises(UnknownArgumentError) as info:
        tool(idempotency=IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flihgt",)))(body)
    err = info.value
    assert isinstance(err, ValueError)
    assert isinstance(err, DeclarationError)
    assert (err.tool, err.field, err.argument) == ("body", "idempotency.key_arguments", "flihgt")
    assert "parameters: flight, seats" in str(err)

    with pytest.raises(UnknownArgumentError, match="check_arguments: 'sets'"):
        tool(idempotency=IdempotencyPolicy(Idempotency.EFFECTFUL, check_arguments=["sets"]))(body)
    with pytest.raises(UnknownArgumentError, match="ToolContext parameter"):
        tool(idempotency=IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=["ctx"]))(body)


def test_policy_validation() -> None:
    p = IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=["a", "b"], check_arguments=None)
    assert p.key_arguments == ("a", "b")
    assert p.check_arguments == ()
    assert IdempotencyPolicy("read_only").kind is Idempotency.READ_ONLY
    assert IdempotencyPolicy(Idempotency.READ_ONLY).key_arguments is None
    assert IdempotencyPolicy(Idempotency.READ_ONLY, key_arguments=()).key_arguments == ()
    assert p == IdempotencyPolicy("effectful", ("a", "b"), ())
    assert hash(p) == hash(IdempotencyPolicy("effectful", ("a", "b")))
    assert repr(p) == "IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=('a', 'b'))"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.kind = Idempotency.READ_ONLY  # type: ignore[misc]
    with pytest.raises(DeclarationError, match="unknown kind 'exactly_once'"):
        IdempotencyPolicy("exactly_once")
    with pytest.raises(TypeError, match="not int"):
        IdempotencyPolicy(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"did you mean \('flight',\)"):
        IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments="flight")
    with pytest.raises(TypeError, match="not int"):
        IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=[1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not int"):
        IdempotencyPolicy(Idempotency.EFFECTFUL, check_arguments=5)  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match="'a' is listed twice"):
        IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=["a", "a"])


def test_kinds() -> None:
    assert [k.value for k in Idempotency] == ["read_only", "idempotent", "effectful"]
    assert [k.deduplicated for k in Idempotency] == [False, True, True]
    assert [k.retried for k in Idempotency] == [True, True, False]
    assert Idempotency("effectful") is Idempotency.EFFECTFUL


def test_tool_context() -> None:
    assert CTX.idempotency_key == "k1"
    bare = ToolContext(tenant="t", run_id="r", call_id="c", tool="x")
    assert bare.idempotency_key is None
    assert bare.attempt == 1
    assert bare.traceparent is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        CTX.tenant = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ToolContext("t", "r", "c", "x")  # type: ignore[call-arg]  # keywords only


def test_context_parameter_is_injected_not_declared() -> None:
    @tool
    def annotated(x: int, context: Annotated[ToolContext, "filled in"]) -> None: ...

    assert annotated.context_parameter == "context"
    assert list(annotated.declaration()["parameters"]["properties"]) == ["x"]

    with pytest.raises(DeclarationError, match="second ToolContext"):

        @tool
        def two(a: ToolContext, b: ToolContext) -> None: ...


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "has space"}, "not a token"),
        ({"name": ""}, "not a token"),
        ({"name": "x" * 129}, "not a token"),
        ({"name": "dot.ted"}, "not a token"),
        ({"timeout": 0}, "positive"),
        ({"timeout": -1}, "positive"),
        ({"timeout": float("inf")}, "positive"),
        ({"timeout": 0.0001}, "less than a millisecond"),
    ],
)
def test_bad_declarations(kwargs: dict[str, Any], match: str) -> None:
    def body(x: int) -> None: ...

    with pytest.raises(DeclarationError, match=match):
        tool(**kwargs)(body)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"timeout": "30s"}, "timeout is in seconds"),
        ({"timeout": True}, "timeout is in seconds"),
        ({"idempotency": "effectful"}, "idempotency is an IdempotencyPolicy"),
        ({"name": 3}, "name is a str"),
        ({"description": b"x"}, "description is a str"),
    ],
)
def test_wrong_types(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        tool(**kwargs)


def test_signatures_a_tool_cannot_have() -> None:
    def star(*args: int) -> None: ...

    def stars(**kwargs: int) -> None: ...

    def positional(x: int, /) -> None: ...

    def unresolved(x: "Missing") -> None: ...  # type: ignore[name-defined]  # noqa: F821

    for f, match in (
        (star, "'args'"),
        (stars, "'kwargs'"),
        (positional, "positional-only"),
        (unresolved, "cannot be resolved"),
    ):
        with pytest.raises(DeclarationError, match=match):
            tool(f)
    with pytest.raises(TypeError, match="a tool already"):
        tool(ping)
    with pytest.raises(TypeError, match="declares a function"):
        tool(ToolContext)


def test_lambda_needs_a_name() -> None:
    with pytest.raises(DeclarationError, match="'<lambda>' is not a token"):
        tool(lambda: None)
    assert tool(name="anon")(lambda: None).name == "anon"


def test_unannotated_parameters_take_any_value() -> None:
    @tool
    def loose(x, y=2):  # type: ignore[no-untyped-def]
        return x

    props = loose.declaration()["parameters"]["properties"]
    assert props == {"x": {}, "y": {"default": 2}}


def test_docstring_sections() -> None:
    doc = parse_docstring(
        """Summary that
        runs on.

        More text.

        Args:
            a: First,
                continued.
            b (int): Second.

            *c: Third, after a blank line.
        Returns:
            Nothing.

        Attributes:
            d: An attribute.
        """
    )
    assert doc.summary == "Summary that runs on."
    assert doc.args == {"a": "First, continued.", "b": "Second.", "c": "Third, after a blank line."}
    assert doc.attributes == {"d": "An attribute."}
    assert parse_docstring(None).summary == ""
    assert parse_docstring("Args:\n    x: y").summary == ""
    assert parse_docstring("Only a line.").args == {}
