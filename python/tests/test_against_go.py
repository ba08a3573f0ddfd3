"""The Python derivation held to the Go side's, on inputs neither was written
for: generated JSON texts (valid and broken, spelled in many ways) and
generated Python values, each given to `emitter key --canonical` (built from
this repository once per session) and to toolexec.keys, which must agree on
the envelope byte for byte, or on the code of the refusal.

TOOLEXEC_GO_EXAMPLES multiplies the number of generated cases (default 1) for
a longer hunt."""

from __future__ import annotations

import decimal
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Emitter
from toolexec import KeyDerivationError, canonical, idempotency_key

_SCALE = max(1, int(os.environ.get("TOOLEXEC_GO_EXAMPLES", "1")))


def _settings(examples: int) -> settings:
    # Under CI the examples are the same on every run, so that a red run can be
    # run again and seen again; elsewhere each run draws new ones.
    return settings(
        max_examples=examples * _SCALE,
        derandomize=os.environ.get("CI") == "true",
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def python_side(
    tenant: str, run_id: str, tool: str, arguments: Any, key_arguments: list[str] | None
) -> tuple[bytes | None, str | None]:
    try:
        return (
            canonical(
                tenant=tenant,
                run_id=run_id,
                tool=tool,
                arguments=arguments,
                key_arguments=key_arguments,
            ),
            None,
        )
    except KeyDerivationError as e:
        return None, str(e.code)


def agree(
    emitter: Emitter,
    raw: bytes,
    key_arguments: list[str] | None,
    *,
    tenant: str = "acme",
    run_id: str = "run_1",
    tool: str = "book",
    python_arguments: Any = None,
) -> None:
    go = emitter.derive(tenant, run_id, tool, raw, key_arguments)
    arguments = raw if python_arguments is None else python_arguments
    envelope, code = python_side(tenant, run_id, tool, arguments, key_arguments)
    assert (envelope, code) == (go.canonical, go.code), f"input {raw!r}"


# --- the pieces of JSON text ------------------------------------------------------

# Characters that exercise the rules: ASCII with the escaped ones, controls,
# combining marks and the composed forms they make, a singleton (U+212B),
# Hangul jamo, the private use area after the surrogates (U+E000, which
# UTF-16 sorts after the astral planes), astral characters, U+2028, and the
# marks Unicode 15 gave a combining class (Python 3.11's tables predate them).
_CHARS = (
    'aAzZ09 _-/"\\\x00\x01\x08\x09\x0a\x0c\x0d\x1f\x7f'
    "\u00e9\u0065\u0301\u0327\u0323\u00c5\u212b\u0041\u030a\u1100\u1161\u11a8\uac00"
    "\u2028\ud7ff\ue000\uffff\u00df\u03a9\u2126\u1e9b\u0345"
    "\U0001d11e\U0001f600\U00010000\U0010ffff"
    "\U00010efd\U00011f41\U0001e08f\U0001e4ec\U0001e4ee\U0001e4ef"
)
_chars = st.sampled_from(_CHARS) | st.characters(blacklist_categories=["Cs"])


@st.composite
def spelled_char(draw: st.DrawFn, c: str) -> str:
    """c as JSON text spells it: literally (when it may be) or escaped."""
    cp = ord(c)
    must = cp < 0x20 or c in '"\\'
    if not must and draw(st.integers(0, 3)) > 0:
        return c
    short = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"'}
    short |= {"\\": "\\\\", "/": "\\/"}
    if c in short and draw(st.booleans()):
        return short[c]
    hexes = "{:04x}" if draw(st.booleans()) else "{:04X}"
    if cp > 0xFFFF:
        v = cp - 0x10000
        return "\\u" + hexes.format(0xD800 + (v >> 10)) + "\\u" + hexes.format(0xDC00 + (v & 0x3FF))
    return "\\u" + hexes.format(cp)


@st.composite
def json_string(draw: st.DrawFn, text: str | None = None) -> str:
    if text is None:
        text = draw(st.text(_chars, max_size=8))
    return '"' + "".join(draw(spelled_char(c)) for c in text) + '"'


@st.composite
def json_number(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "", "-"]))
    whole = draw(
        st.sampled_from(["0", "1", "2", "9"])
        | st.from_regex(r"[1-9][0-9]{0,25}", fullmatch=True)
        | st.just("9007199254740993")
        | st.just("999999999999999999999")
    )
    frac = draw(
        st.sampled_from(["", "", ".0", ".5", ".000"])
        | st.from_regex(r"\.[0-9]{1,20}", fullmatch=True)
    )
    exp = ""
    if draw(st.booleans()):
        e = draw(
            st.integers(-30, 30)
            | st.integers(-340, 320)
            | st.sampled_from([308, 309, -307, -308, -323, -324, -325, 400, -400, 999999999])
        )
        mark = draw(st.sampled_from(["e", "E"]))
        plus = draw(st.sampled_from(["", "+"])) if e >= 0 else "-"
        pad = "0" * draw(st.integers(0, 2))
        exp = f"{mark}{plus}{pad}{abs(e)}"
    return sign + whole + frac + exp


_NAMES = [
    "a",
    "b",
    "flight",
    "seats",
    "\u00e9",
    "e\u0301",
    "\u00c5",
    "\u212b",
    "\U0001f600",
    "\ue000",
    "",
    "A",
]


def _space(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(["", "", "", " ", "\n", "\t", "\r\n  "]))


def json_value(depth: int = 3) -> st.SearchStrategy[str]:
    leaves = st.one_of(
        json_number(),
        json_string(),
        st.sampled_from(["true", "false", "null"]),
    )
    if depth == 0:
        return leaves
    return st.one_of(leaves, json_array(depth - 1), json_object(depth - 1))


@st.composite
def json_array(draw: st.DrawFn, depth: int) -> str:
    items = draw(st.lists(json_value(depth), max_size=4))
    s = _space(draw)
    return "[" + s + ("," + s).join(items) + _space(draw) + "]"


@st.composite
def json_object(draw: st.DrawFn, depth: int) -> str:
    names = draw(
        st.lists(st.sampled_from(_NAMES) | st.text(_chars, max_size=4), max_size=5, unique=True)
    )
    parts = []
    for name in names:
        parts.append(
            _space(draw)
            + draw(json_string(name))
            + _space(draw)
            + ":"
            + _space(draw)
            + draw(json_value(depth))
            + _space(draw)
        )
    return "{" + ",".join(parts) + "}"


_CORRUPTIONS = [
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"\xf4\x90\x80\x80",
    b"\xc0\xaf",
    b'\\ud800"',
    b"\\udc00",
    b"\\ud800\\u0041",
    b"\\ud800\\uZZZZ",
    b"\\x",
    b",",
    b"}",
    b"]",
    b'"',
    b"\x00",
    b"\t",
    b"01",
    b"1.",
    b"-",
    b"1e",
    b"NaN",
    b"\xef\xbb\xbf",
    b'"a":1,"a":2',
]


@st.composite
def maybe_corrupt(draw: st.DrawFn, text: bytes) -> bytes:
    if draw(st.integers(0, 4)) > 0:
        return text
    at = draw(st.integers(0, len(text)))
    if draw(st.booleans()) and at < len(text):
        return text[:at] + text[at + 1 :]
    return text[:at] + draw(st.sampled_from(_CORRUPTIONS)) + text[at:]


@st.composite
def key_arguments(draw: st.DrawFn) -> list[str] | None:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return None
    if choice == 1:
        return []
    return draw(st.lists(st.sampled_from([n for n in _NAMES if n]), min_size=1, max_size=3))


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    # Mostly an object, sometimes another value.
    text = draw(json_value(2)) if draw(st.integers(0, 9)) == 0 else draw(json_object(3))
    return draw(maybe_corrupt((_space(draw) + text + _space(draw)).encode("utf-8")))


@given(raw=documents(), names=key_arguments())
@_settings(150)
def test_json_text_agrees_with_go(emitter: Emitter, raw: bytes, names: list[str] | None) -> None:
    agree(emitter, raw, names)


@given(number=json_number(), space=st.sampled_from(["", " "]))
@_settings(120)
def test_numbers_agree_with_go(emitter: Emitter, number: str, space: str) -> None:
    agree(emitter, f'{{"n":{space}{number}}}'.encode(), None)


# --- Python values -------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(10**25), 10**25),
    st.sampled_from([10**21 - 1, 10**21, -(10**21), 2**53 + 1, 2**1023, 2**1024 - 2**970]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, -0.0, 2.0, 1e20, 123e-20]),
    st.text(_chars, max_size=6),
)


def _python_values() -> st.SearchStrategy[Any]:
    keys = st.sampled_from(_NAMES) | st.text(_chars, max_size=4)
    return st.recursive(
        _scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.tuples(inner, inner)
            | st.dictionaries(keys, inner, max_size=4)
        ),
        max_leaves=12,
    )


@given(
    value=st.dictionaries(
        st.sampled_from(_NAMES) | st.text(_chars, max_size=4), _python_values(), max_size=5
    ),
    names=key_arguments(),
    ascii_only=st.booleans(),
)
@_settings(120)
def test_python_values_agree_with_go(
    emitter: Emitter, value: dict[str, Any], names: list[str] | None, ascii_only: bool
) -> None:
    # json.dumps spells floats with repr, the text a Python program sends.
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    agree(emitter, raw, names, python_arguments=value)


@given(
    number=st.decimals(allow_nan=False, allow_infinity=False)
    | st.decimals(allow_nan=False, allow_infinity=False, places=3)
)
@_settings(60)
def test_decimals_agree_with_go(emitter: Emitter, number: decimal.Decimal) -> None:
    # The Decimal's text is the JSON a program would send for it.
    agree(emitter, f'{{"n":{number}}}'.encode(), None, python_arguments={"n": number})


@given(
    tenant=st.text(_chars.filter(lambda c: c != "\x00"), min_size=1, max_size=6),
    run_id=st.text(_chars.filter(lambda c: c != "\x00"), min_size=1, max_size=6),
    tool=st.text(_chars.filter(lambda c: c != "\x00"), min_size=1, max_size=6),
)
@_settings(40)
def test_envelope_strings_agree_with_go(
    emitter: Emitter, tenant: str, run_id: str, tool: str
) -> None:
    agree(emitter, b'{"flight":"BA117"}', ["flight"], tenant=tenant, run_id=run_id, tool=tool)


# --- chosen cases -------------------------------------------------------------------

CHOSEN = [
    # The marks Unicode 15.0 gave a combining class, around marks Python knew:
    # the Go side reorders and composes across them.
    '{"s":"e\U00010efd\u0301"}',
    '{"s":"a\u0301\U00010efd"}',
    '{"s":"e\u0301\U0001e4ec\u0323"}',
    '{"s":"\U00011f41\u094d"}',
    '{"s":"o\U0001e08f\u0323\u0302"}',
    '{"e\U00010efd\u0301":1,"\u00e9\U00010efd":2}',
    # Sorting by UTF-16 code units: astral before U+E000..U+FFFF.
    '{"\ue000":1,"\U0001f600":2,"\uffff":3,"\U00010000":4,"z":5}',
    # Exponent spellings at the edges of the exact path and of the doubles.
    '{"n":[1e20,1e21,100000000000000000000.0,999999999999999999999.9,1E+20,1e-6,1e-7]}',
    '{"n":[2.2250738585072011e-308,4.9406564584124654e-324,2.4703282292062328e-324,2.4703282292062327e-324]}',
    '{"n":[1.7976931348623158e308,1.7976931348623158079e308,1.797693134862315807e308]}',
    '{"n":[0.1e-999999999999999999999,0e-99999999999999999999999,1e00000000000000000000000021]}',
    '{"n":123456789012345678901234567890e-10}',
    '{"n":-0.000000000000000000000000000000000000000001}',
]


@pytest.mark.parametrize("text", CHOSEN)
def test_chosen_cases_agree_with_go(emitter: Emitter, text: str) -> None:
    agree(emitter, text.encode("utf-8"), None)


def test_limits_agree_with_go(emitter: Emitter) -> None:
    members = ",".join(f'"m{i}":{i}' for i in range(1001))
    elements = ",".join("0" for _ in range(10_001))
    values = ",".join(f'"v{i}":[' + ",".join("1" for _ in range(99)) + "]" for i in range(201))
    for text in (
        "{" + members + "}",
        '{"a":[' + elements + "]}",
        "{" + values + "}",
        '{"a":' * 127 + "{}" + "}" * 127,
        '{"a":' * 126 + "{}" + "}" * 126,
    ):
        agree(emitter, text.encode(), None)


def test_key_matches_the_emitters(emitter: Emitter) -> None:
    raw = b'{"flight":"BA117","seats":2,"request_id":"x"}'
    for names in (None, [], ["flight"], ["seats", "flight"]):
        want = emitter.key("acme", "run_1", "book", raw, names)
        got = idempotency_key(
            tenant="acme", run_id="run_1", tool="book", arguments=raw, key_arguments=names
        )
        assert got == want
