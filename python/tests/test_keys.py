"""toolexec.keys beyond the vectors: arguments given as Python values, the
parameters' types, and the bounds."""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import hashlib
import types
from typing import Any

import pytest

from toolexec import (
    Arguments,
    ArgumentsNotObjectError,
    InvalidArgumentsError,
    KeyDerivationError,
    KeyErrorCode,
    KeyUnderivableError,
    UnsupportedValueError,
    canonical,
    idempotency_key,
)
from toolexec.keys import DEFAULT_MAX_ELEMENTS, DEFAULT_MAX_MEMBERS, DEFAULT_MAX_VALUES, MAX_DEPTH

SEED_KEY = "dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496"


def envelope_args(arguments: Any, key_arguments: Any = None) -> str:
    """The arguments part of the canonical envelope, as text."""
    env = canonical(
        tenant="t", run_id="r", tool="x", arguments=arguments, key_arguments=key_arguments
    ).decode()
    prefix, suffix = '{"arguments":', ',"run_id":"r","tenant":"t","tool":"x"}'
    assert env.startswith(prefix)
    assert env.endswith(suffix)
    return env[len(prefix) : -len(suffix)]


def code_of(arguments: Any, key_arguments: Any = None) -> str:
    with pytest.raises(KeyDerivationError) as info:
        canonical(
            tenant="t", run_id="r", tool="x", arguments=arguments, key_arguments=key_arguments
        )
    return str(info.value.code)


def test_seed_example_from_a_mapping_and_from_text() -> None:
    kw: dict[str, Any] = {"tenant": "acme", "run_id": "run_1", "tool": "book"}
    from_mapping = idempotency_key(
        **kw, arguments={"flight": "BA117", "request_id": "a"}, key_arguments=("flight",)
    )
    from_text = idempotency_key(
        **kw, arguments='{"request_id":"b","flight":"BA117"}', key_arguments=["flight"]
    )
    from_bytes = idempotency_key(**kw, arguments=b'{"flight":"BA117"}', key_arguments=["flight"])
    assert from_mapping == from_text == from_bytes == SEED_KEY


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (1, "1"),
        (-0, "0"),
        (9007199254740993, "9007199254740993"),
        (10**21 - 1, "999999999999999999999"),
        (-(10**21) + 1, "-999999999999999999999"),
        (10**21, "1e+21"),
        (2**69, "590295810358705651712"),
        (2**70, "1.1805916207174113e+21"),
        (2**80, "1.2089258196146292e+24"),
        (2.0, "2"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (123456789.125, "123456789.125"),
        (decimal.Decimal("2.50"), "2.5"),
        (decimal.Decimal("-0E+3"), "0"),
        (decimal.Decimal("9007199254740993.000"), "9007199254740993"),
        (decimal.Decimal("0.1"), "0.1"),
        (decimal.Decimal("1E+21"), "1e+21"),
        (decimal.Decimal("1.2345E-7"), "1.2345e-7"),
        ("caf\u0065\u0301", '"caf\u00e9"'),
        ('\x00\x1f"\\/\u2028\x7f', '"\\u0000\\u001f\\"\\\\/\u2028\x7f"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ([1, [2, (3, 4)]], "[1,[2,[3,4]]]"),
        ((), "[]"),
        ({}, "{}"),
        ({"b": 1, "a": {"d": [], "c": None}}, '{"a":{"c":null,"d":[]},"b":1}'),
    ],
)
def test_python_values(value: Any, text: str) -> None:
    assert envelope_args({"v": value}) == '{"v":' + text + "}"


def test_booleans_never_equal_integers() -> None:
    keys = {
        idempotency_key(tenant="t", run_id="r", tool="x", arguments={"v": v})
        for v in (True, 1, 1.0, "1", False, 0, None)
    }
    # 1 and 1.0 are one number; true, "1", false, 0 and null are each their own.
    assert len(keys) == 6


def test_two_spellings_are_one_key() -> None:
    a = idempotency_key(tenant="t", run_id="r", tool="x", arguments={"seats": 2, "c": "\u00e9"})
    b = idempotency_key(
        tenant="t", run_id="r", tool="x", arguments='{"c":"e\\u0301","seats":20e-1}'
    )
    c = idempotency_key(tenant="t", run_id="r", tool="x", arguments={"c": "e\u0301", "seats": 2.0})
    assert a == b == c


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_str_and_int_subclasses_count_as_their_values() -> None:
    assert envelope_args({"c": Colour.RED, "l": Level.HIGH}) == '{"c":"red","l":3}'


def test_other_mappings_and_sequences() -> None:
    ordered = collections.OrderedDict([("b", 2), ("a", 1)])
    proxy = types.MappingProxyType({"x": ordered})
    assert envelope_args(proxy) == '{"x":{"a":1,"b":2}}'


def test_members_sort_by_utf16_code_units() -> None:
    assert envelope_args({"\ue000": 1, "\U0001f600": 2, "z": 3, "": 4}) == (
        '{"":4,"z":3,"\U0001f600":2,"\ue000":1}'
    )


@pytest.mark.parametrize(
    "value",
    [{1, 2}, b"bytes", bytearray(b"x"), object(), datetime.date(2024, 1, 1), 1j, frozenset()],
)
def test_values_without_a_json_form_are_refused(value: object) -> None:
    with pytest.raises(UnsupportedValueError) as info:
        canonical(tenant="t", run_id="r", tool="x", arguments={"legs": [1, {"v": value}]})
    err = info.value
    assert isinstance(err, TypeError)
    assert isinstance(err, ValueError)
    assert err.code == KeyErrorCode.INVALID_JSON
    assert err.path == "arguments['legs'][1]['v']"
    assert type(value).__qualname__ in str(err)


def test_member_names_must_be_str() -> None:
    with pytest.raises(UnsupportedValueError, match="member name 1 is of type int"):
        canonical(tenant="t", run_id="r", tool="x", arguments={"a": {1: "x"}})


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        -float("inf"),
        10**400,
        -(2**1024),
        decimal.Decimal("NaN"),
        decimal.Decimal("-Infinity"),
        decimal.Decimal("1E+400"),
        decimal.Decimal("1E-400"),
    ],
)
def test_numbers_beyond_the_doubles_are_refused(value: float) -> None:
    assert code_of({"n": value}) == "number_out_of_range"


def test_the_largest_integer_below_overflow_rounds_to_the_largest_double() -> None:
    # Within half a unit of the largest double, an integer still rounds to it.
    assert envelope_args({"n": 2**1024 - 2**970 - 1}) == '{"n":1.7976931348623157e+308}'


def test_names_equal_after_nfc_are_refused() -> None:
    assert code_of({"\u00e9": 1, "e\u0301": 2}) == "nfc_collision"
    assert code_of({"x": [{"\u00c5": 1, "\u212b": 2}]}) == "nfc_collision"


def test_lone_surrogates_are_refused() -> None:
    assert code_of({"s": "a\ud800"}) == "invalid_unicode"
    assert code_of({"\udc00": 1}) == "invalid_unicode"
    # In JSON text held in a str: a lone surrogate is no UTF-8, refused inside
    # a string as invalid Unicode and outside one as invalid JSON.
    assert code_of('{"s":"\ud800"}') == "invalid_unicode"
    assert code_of('{"s":1\ud800}') == "invalid_json"
    for field in ("tenant", "run_id", "tool"):
        kw: dict[str, Any] = {"tenant": "t", "run_id": "r", "tool": "x", field: "a\udfff"}
        with pytest.raises(InvalidArgumentsError) as info:
            canonical(**kw, arguments={})
        assert info.value.code == "invalid_unicode"
        assert info.value.path == field


def test_tenant_run_and_tool_are_nfc_and_escaped() -> None:
    env = canonical(tenant="cafe\u0301", run_id='r"1', tool="t\x01", arguments={})
    assert (
        env.decode() == '{"arguments":{},"run_id":"r\\"1","tenant":"caf\u00e9","tool":"t\\u0001"}'
    )


@pytest.mark.parametrize("arguments", [[1, 2], None, 5, ("a", 1)])
def test_arguments_must_be_an_object(arguments: Any) -> None:
    with pytest.raises(ArgumentsNotObjectError) as info:
        canonical(tenant="t", run_id="r", tool="x", arguments=arguments)
    assert info.value.code == "arguments_not_object"


def test_arguments_as_json_text_must_be_an_object() -> None:
    assert code_of("[1]") == "arguments_not_object"
    assert code_of("  null ") == "arguments_not_object"
    assert code_of("[1e400]") == "number_out_of_range"  # the whole text is checked first


def test_key_arguments() -> None:
    args = {"flight": "BA117", "seats": None, "caf\u00e9": 1}
    assert envelope_args(args, []) == "{}"
    assert envelope_args(args, ("seats", "flight", "seats")) == '{"flight":"BA117","seats":null}'
    assert envelope_args(args, ["cafe\u0301"]) == '{"caf\u00e9":1}'
    assert envelope_args(args, iter(["flight"])) == '{"flight":"BA117"}'
    with pytest.raises(KeyUnderivableError) as info:
        canonical(tenant="t", run_id="r", tool="x", arguments=args, key_arguments=["flight", "x"])
    assert info.value.argument == "x"
    assert info.value.code == "key_underivable"
    assert "'x'" in str(info.value)
    # A name that no argument can have (not valid Unicode) is simply absent.
    with pytest.raises(KeyUnderivableError):
        canonical(tenant="t", run_id="r", tool="x", arguments=args, key_arguments=["\ud800"])


def test_key_arguments_must_be_a_sequence_of_names() -> None:
    with pytest.raises(TypeError, match=r"did you mean \('flight',\)"):
        canonical(tenant="t", run_id="r", tool="x", arguments={"flight": 1}, key_arguments="flight")
    with pytest.raises(TypeError, match="not int"):
        canonical(tenant="t", run_id="r", tool="x", arguments={"a": 1}, key_arguments=[1])  # type: ignore[list-item]


def test_tenant_run_and_tool_must_be_str() -> None:
    with pytest.raises(TypeError, match="tenant is a str"):
        canonical(tenant=b"t", run_id="r", tool="x", arguments={})  # type: ignore[arg-type]


def test_depth() -> None:
    def nest(levels: int) -> Any:
        v: Any = []
        for _ in range(levels - 1):
            v = [v]
        return v

    envelope_args({"a": nest(MAX_DEPTH - 1)})  # the arguments object is the first level
    assert code_of({"a": nest(MAX_DEPTH)}) == "too_deep"
    loop: list[Any] = []
    loop.append(loop)
    assert code_of({"a": loop}) == "too_deep"


def test_bounds() -> None:
    envelope_args({f"m{i}": i for i in range(DEFAULT_MAX_MEMBERS)})
    assert code_of({f"m{i}": i for i in range(DEFAULT_MAX_MEMBERS + 1)}) == "too_many_values"
    envelope_args({"a": [0] * DEFAULT_MAX_ELEMENTS})
    assert code_of({"a": [0] * (DEFAULT_MAX_ELEMENTS + 1)}) == "too_many_values"
    # The arguments object counts as one value, each list as one more.
    per = 99
    lists = (DEFAULT_MAX_VALUES - 1) // (per + 1)
    fits = {f"v{i}": [1] * per for i in range(lists)}
    envelope_args(fits)
    over = dict(fits, extra=[1] * per)
    assert code_of(over) == "too_many_values"


def test_text_input_kinds() -> None:
    text = '{"a":[1,2.50,"x"]}'
    want = envelope_args(text)
    assert want == '{"a":[1,2.5,"x"]}'
    assert envelope_args(text.encode()) == want
    assert envelope_args(bytearray(text.encode())) == want


def test_arguments_parsed_once() -> None:
    args = Arguments.parse('{"seats":2,"flight":"BA117","\u00e9":null}')
    assert args.names == ("flight", "seats", "\u00e9")
    assert args.has("e\u0301")
    assert not args.has("x")
    assert args.canonical_arguments() == '{"flight":"BA117","seats":2,"\u00e9":null}'.encode()
    env = args.canonical(tenant="acme", run_id="run_1", tool="book", key_arguments=["flight"])
    assert hashlib.sha256(env).hexdigest() == args.key(
        tenant="acme", run_id="run_1", tool="book", key_arguments=["flight"]
    )
