"""The client's wire without a server: a call as §4 of docs/PROTOCOL.md says
(its attributes read from the page), answers read in both modes as §4 and §5
say, the refusals of what is not an answer, the errors an answer becomes,
and the client's own bookkeeping."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import pickle
import re
import urllib.parse
from typing import Any

import pytest

from conftest import REPO
from toolexec import (
    CallResult,
    CatalogError,
    Client,
    FailedError,
    FailureCode,
    HistoryError,
    Idempotency,
    IdempotencyPolicy,
    IndeterminateOutcomeError,
    IndeterminateReason,
    JetStreamError,
    MalformedAnswerError,
    NoCatalogServiceError,
    NoHistoryServiceError,
    NoStreamError,
    OldExecutorsError,
    RejectedError,
    RejectionCode,
    RunEvent,
    RunEventKind,
    ToolDeclaration,
    ToolexecError,
    _wire,
    tool,
)
from toolexec import client as client_module
from toolexec.client import _result, _SentIDs

KEY = "dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496"


def section(n: int) -> str:
    text = (REPO / "docs" / "PROTOCOL.md").read_text()
    start = text.index(f"\n## {n}. ")
    return text[start : text.index("\n## ", start + 1)]


def table_rows(text: str, first_header: str) -> list[tuple[list[str], str]]:
    """The rows of the table whose first column is headed first_header: the
    backticked names of each first cell, and the second cell."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[i + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((re.findall(r"`([a-z_]+)`", cells[0]), cells[1]))
    return rows


def call(**kw: Any) -> tuple[dict[str, Any], bytes]:
    args = kw.pop("arguments", b'{ "flight" : "BA117",  "seats": 2 }')
    payload = _wire.call_event(
        tenant=kw.pop("tenant", "acme"),
        tool=kw.pop("tool", "book"),
        run_id=kw.pop("run_id", "run_1"),
        call_id=kw.pop("call_id", "call_1"),
        source=kw.pop("source", "/agents/trip-planner"),
        arguments=args,
        time=kw.pop("time", datetime.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=datetime.UTC)),
        **kw,
    )
    return json.loads(payload), payload


# --- a call (§4) ------------------------------------------------------------------


def test_a_calls_attributes_are_section_4s() -> None:
    rows = table_rows(section(4), "attribute")
    named = {n for names, _ in rows for n in names}
    required = {names[0] for names, value in rows if names and "optional" not in value}
    event, _ = call(traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01", tracestate="k=v")
    # The data row's name is not backticked: the event's data member.
    assert set(event) - {"data"} <= named
    assert required - {"subject"} <= set(event)
    assert set(event) == {
        "specversion",
        "id",
        "source",
        "type",
        "subject",
        "datacontenttype",
        "time",
        "data",
        "runid",
        "tenant",
        "traceparent",
        "tracestate",
    }
    assert event["specversion"] == "1.0"
    assert event["type"] == "io.tesserix.toolexec.call"
    assert event["id"] == "call_1"
    assert event["subject"] == "book"
    assert event["tenant"] == "acme"
    assert event["runid"] == "run_1"
    assert event["source"] == "/agents/trip-planner"
    assert event["datacontenttype"] == "application/json"
    assert event["time"] == "2026-01-02T03:04:05.006000Z"
    assert event["data"] == {"arguments": {"flight": "BA117", "seats": 2}}


def test_a_calls_arguments_go_as_given() -> None:
    _, payload = call()
    assert b'"data":{"arguments":{ "flight" : "BA117",  "seats": 2 }}' in payload
    event, _ = call(time=None)
    assert "time" not in event
    assert "traceparent" not in event


def test_a_calls_headers() -> None:
    h = _wire.call_headers(repeat=False, traceparent=None)
    assert h == {
        "Content-Type": "application/cloudevents+json",
        "Nats-Expected-Stream": "TOOLEXEC_CALLS_V2",
    }
    tp = "00-" + "1" * 32 + "-" + "2" * 16 + "-00"
    h = _wire.call_headers(repeat=True, traceparent=tp)
    assert h["Toolexec-Repeat"] == "true"
    assert h["traceparent"] == tp
    assert "Nats-Msg-Id" not in h
    assert _wire.call_subject("acme", "book", "call_1") == "toolexec.call.acme.book.call_1"
    assert _wire.answer_filter("acme", "book", "*", "c1") == "toolexec.event.acme.*.book.*.c1"


def test_arguments_from_python_values() -> None:
    args = {
        "d": decimal.Decimal("0.10"),
        "big": 2**70,
        "f": 0.1,
        "t": ("a", 1),
        "n": None,
        "b": True,
        "s": 'Zu\u0308rich \u2028 "q"',
        "nested": {"x": [1, {"y": False}]},
    }
    text = _wire.encode_arguments(args, "book")
    assert b'"d":0.10' in text
    assert b'"big":1180591620717411303424' in text
    back = json.loads(text)
    assert back["t"] == ["a", 1]
    assert back["s"] == args["s"]
    assert back["nested"] == {"x": [1, {"y": False}]}
    assert _wire.encode_arguments(None, "book") == b"{}"
    assert _wire.encode_arguments(b' {"a":1} ', "book") == b' {"a":1} '


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"x": float("inf")}, RejectionCode.INVALID_JSON),
        ({"x": decimal.Decimal("NaN")}, RejectionCode.INVALID_JSON),
        ({"x": b"bytes"}, RejectionCode.INVALID_JSON),
        ({"x": datetime.date(2026, 1, 1)}, RejectionCode.INVALID_JSON),
        ({("a",): 1}, RejectionCode.INVALID_JSON),
        ({"x": "\udc00"}, RejectionCode.INVALID_UNICODE),
        ("\ud800", RejectionCode.INVALID_UNICODE),
        (b"\xc3(", RejectionCode.INVALID_UNICODE),
        ('{"x": NaN}', RejectionCode.BAD_DATA),
        ("{'x': 1}", RejectionCode.BAD_DATA),
        ("", RejectionCode.BAD_DATA),
        ("null", RejectionCode.ARGUMENTS_NOT_OBJECT),
        (" [] ", RejectionCode.ARGUMENTS_NOT_OBJECT),
        ([1], RejectionCode.ARGUMENTS_NOT_OBJECT),
        (42, RejectionCode.ARGUMENTS_NOT_OBJECT),
    ],
)
def test_arguments_refused(arguments: Any, code: RejectionCode) -> None:
    with pytest.raises(RejectedError) as e:
        _wire.encode_arguments(arguments, "book")
    assert e.value.code is code
    assert e.value.field == "arguments"
    assert e.value.event is None


def test_arguments_that_contain_themselves_are_refused() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(RejectedError, match="contains itself"):
        _wire.encode_arguments(loop, "book")


def test_tokens_and_trace_context() -> None:
    _wire.check_tokens("acme", "book", "run_1", "call-1")
    for tenant, tool_name, run_id, call_id, field in (
        ("", "book", "r", "c", "tenant"),
        ("acme", "book", "r.1", "c", "runid"),
        ("acme", "book", "r", "c>", "id"),
        ("acme", "b k", "r", "c", "subject"),
        ("é", "book", "r", "c", "tenant"),
    ):
        with pytest.raises(RejectedError) as e:
            _wire.check_tokens(tenant, tool_name, run_id, call_id)
        assert (e.value.code, e.value.field) == (RejectionCode.BAD_TOKEN, field)
    _wire.check_trace(None, None)
    _wire.check_trace("00-" + "a" * 32 + "-" + "b" * 16 + "-01", None)
    for tp, ts in (
        ("garbage", None),
        (None, "k=v"),
        ("00-" + "a" * 32 + "-" + "b" * 16 + "-01", "a\r\nb"),
    ):
        with pytest.raises(ValueError, match="trace"):
            _wire.check_trace(tp, ts)


# --- answers (§5), in both modes ----------------------------------------------------


def structured(kind: str, data: dict[str, Any], **attrs: Any) -> dict[str, Any]:
    event = {
        "specversion": "1.0",
        "id": "6f1d",
        "source": "/toolexec/executor/ex1",
        "type": f"io.tesserix.toolexec.{kind}",
        "subject": "book",
        "datacontenttype": "application/json",
        "time": "2026-12-07T03:07:56.468770088Z",
        "data": data,
        "callid": "call_1",
        "runid": "run_1",
        "tenant": "acme",
        "idempotencykey": KEY,
    }
    event.update(attrs)
    return {k: v for k, v in event.items() if v is not None}


def as_structured(event: dict[str, Any]) -> tuple[dict[str, list[str]], bytes]:
    return {"Content-Type": ["application/cloudevents+json"]}, json.dumps(event).encode()


def percent(v: str) -> str:
    """The binding's percent-encoding: space, '"', '%' and all but printable
    ASCII, as bytes of UTF-8."""
    return "".join(
        f"%{b:02X}" if b <= 0x20 or b > 0x7E or b in b'"%' else chr(b) for b in v.encode()
    )


def as_binary(event: dict[str, Any]) -> tuple[dict[str, list[str]], bytes]:
    h = {"Nats-Msg-Id": [event["id"]]}
    for k, v in event.items():
        if k == "data":
            continue
        if k == "datacontenttype":
            h["Content-Type"] = [v]
        else:
            h[f"ce-{k}"] = [percent(v)]
    return h, json.dumps(event["data"]).encode()


MODES = {"structured": as_structured, "binary": as_binary}


@pytest.mark.parametrize("mode", MODES)
def test_answers_of_each_kind_in_each_mode(mode: str) -> None:
    enc = MODES[mode]
    cases: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("completed", {"tool": "book", "outcome": "K7Q2ZD"}, {}),
        ("deduplicated", {"tool": "book", "outcome": ""}, {}),
        (
            "indeterminate",
            {"tool": "book", "reason": "body_failed", "body_entered": True, "error": "reset"},
            {},
        ),
        ("failed", {"tool": "book", "error": "409 Conflict", "code": "no_effect"}, {}),
        (
            "rejected",
            {
                "tool": "book",
                "error": "seats: want integer",
                "code": "schema_violation",
                "field": "/arguments/seats",
            },
            {"idempotencykey": None},
        ),
        (
            "resolved",
            {
                "key": KEY,
                "action": "complete",
                "outcome": "K7Q2ZD",
                "operator": "ana",
                "tool": "book",
            },
            {"idempotencykey": None},
        ),
    ]
    for kind, data, attrs in cases:
        h, payload = enc(structured(kind, data, **attrs))
        ev = _wire.decode_answer(h, payload, subject="toolexec.event.acme.x", seq=7)
        assert ev.kind is RunEventKind.from_wire(kind)
        assert (ev.tenant, ev.tool, ev.run_id, ev.call_id) == ("acme", "book", "run_1", "call_1")
        assert ev.key == (None if kind == "rejected" else KEY)
        assert ev.id == "6f1d"
        assert ev.source == "/toolexec/executor/ex1"
        assert ev.subject == "toolexec.event.acme.x"
        assert ev.seq == 7
        assert ev.time == datetime.datetime(2026, 12, 7, 3, 7, 56, 468770, tzinfo=datetime.UTC)
        assert ev.outcome == data.get("outcome")
        assert ev.error == data.get("error")
        assert ev.field == data.get("field")
        assert ev.action == data.get("action")
        assert ev.operator == data.get("operator")
    ind = _wire.decode_answer(
        *enc(
            structured(
                "indeterminate", {"tool": "book", "reason": "timeout", "body_entered": False}
            )
        )
    )
    assert ind.reason is IndeterminateReason.TIMEOUT
    assert ind.body_entered is False
    failed = _wire.decode_answer(
        *enc(structured("failed", {"tool": "book", "error": "e", "code": "timeout"}))
    )
    assert failed.code is FailureCode.TIMEOUT  # not the rejection code of the same name


def test_binary_values_are_percent_decoded_and_unquoted() -> None:
    h, payload = as_binary(structured("completed", {"tool": "book", "outcome": "x"}))
    h["ce-source"] = ['"/toolexec/executor/a b\\"c"']  # a quoted string, an older sender's
    h["CE-TRACEPARENT"] = [percent("00-" + "a" * 32 + "-" + "b" * 16 + "-01")]
    h["ce-tracestate"] = ["k%3Dv%2C%C3%A9"]
    ev = _wire.decode_answer(h, payload)
    assert ev.source == '/toolexec/executor/a b"c'
    assert ev.traceparent == "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    assert ev.tracestate == "k=v,é"


def test_the_percent_rule_round_trips() -> None:
    for s in ("plain", "a b", "100%", 'q"q', "é\u2028\U0001f600", "\x00\x7f~!"):
        assert _wire.percent_decode(percent(s)) == s
        assert _wire.percent_decode(percent(s).lower()) == s
        assert urllib.parse.unquote(percent(s)) == s


def test_a_message_without_headers_is_structured() -> None:
    event = structured("completed", {"tool": "book", "outcome": "x"})
    ev = _wire.decode_answer(None, json.dumps(event).encode())
    assert ev.kind is RunEventKind.TOOL_COMPLETED
    # data_base64 stands for data.
    del event["data"]
    event["data_base64"] = base64.b64encode(b'{"tool":"book","outcome":"y"}').decode()
    assert _wire.decode_answer({}, json.dumps(event).encode()).outcome == "y"


def test_unknown_codes_and_reasons_stay_strings() -> None:
    ev = _wire.decode_answer(
        *as_structured(
            structured("indeterminate", {"tool": "book", "reason": "moon", "body_entered": True})
        )
    )
    assert ev.reason == "moon"
    assert not isinstance(ev.reason, IndeterminateReason)


def _with(event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = dict(event)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


GOOD = structured("completed", {"tool": "book", "outcome": "x"})

NOT_ANSWERS: list[tuple[str, Any]] = [
    ("specversion 0.3", as_structured(_with(GOOD, specversion="0.3"))),
    ("a call", as_structured(_with(GOOD, type="io.tesserix.toolexec.call"))),
    ("another type", as_structured(_with(GOOD, type="com.example.completed"))),
    ("no tenant", as_structured(_with(GOOD, tenant=None))),
    ("a bad tenant", as_structured(_with(GOOD, tenant="a.b"))),
    ("a tenant not a string", as_structured(_with(GOOD, tenant=7))),
    ("no id", as_structured(_with(GOOD, id=None))),
    ("no run", as_structured(_with(GOOD, runid=None))),
    ("data not an object", as_structured(_with(GOOD, data=["x"]))),
    ("no outcome", as_structured(_with(GOOD, data={"tool": "book"}))),
    ("outcome not a string", as_structured(_with(GOOD, data={"tool": "book", "outcome": 1}))),
    ("the tools differ", as_structured(_with(GOOD, data={"tool": "fly", "outcome": "x"}))),
    ("a bad key", as_structured(_with(GOOD, idempotencykey="ABC"))),
    (
        "deduplicated without a key",
        as_structured(
            structured("deduplicated", {"tool": "book", "outcome": "x"}, idempotencykey=None)
        ),
    ),
    ("plain text data", as_structured(_with(GOOD, datacontenttype="text/plain"))),
    ("a time that is none", as_structured(_with(GOOD, time="yesterday"))),
    ("JSON that is not", ({}, b'{"specversion":"1.0",')),
    ("a member twice", ({}, b'{"specversion":"1.0","specversion":"1.0"}')),
    ("not an object", ({}, b"[1]")),
    (
        "another event format",
        ({"Content-Type": ["application/cloudevents-batch+json"]}, json.dumps(GOOD).encode()),
    ),
    (
        "Content-Type twice",
        ({"Content-Type": ["application/cloudevents+json", "text/plain"]}, b"{}"),
    ),
]


def _binary_twice() -> tuple[dict[str, list[str]], bytes]:
    h, d = as_binary(GOOD)
    h["CE-ID"] = ["again"]
    return h, d


def _binary_bad_percent() -> tuple[dict[str, list[str]], bytes]:
    h, d = as_binary(GOOD)
    h["ce-source"] = ["/a%2"]
    return h, d


def _binary_not_utf8() -> tuple[dict[str, list[str]], bytes]:
    h, d = as_binary(GOOD)
    h["ce-source"] = ["/a%FF"]
    return h, d


def _binary_unclosed_quote() -> tuple[dict[str, list[str]], bytes]:
    h, d = as_binary(GOOD)
    h["ce-source"] = ['"/a']
    return h, d


NOT_ANSWERS += [
    ("a ce- header twice", _binary_twice()),
    ("a bad percent escape", _binary_bad_percent()),
    ("percent escapes that are not UTF-8", _binary_not_utf8()),
    ("an unclosed quoted string", _binary_unclosed_quote()),
    ("binary data that is not JSON", (as_binary(GOOD)[0], b"{")),
]


@pytest.mark.parametrize(("why", "message"), NOT_ANSWERS, ids=[w for w, _ in NOT_ANSWERS])
def test_what_is_not_an_answer(why: str, message: tuple[Any, bytes]) -> None:
    with pytest.raises(MalformedAnswerError):
        _wire.decode_answer(message[0], message[1], subject="toolexec.event.acme.x")


def test_stored_messages() -> None:
    h, payload = as_binary(GOOD)
    block = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, vs in h.items() for v in vs) + "\r\n"
    reply = {
        "message": {
            "subject": "toolexec.event.acme.completed.book.run_1.call_1",
            "seq": 41,
            "hdrs": base64.b64encode(block.encode()).decode(),
            "data": base64.b64encode(payload).decode(),
            "time": "2026-12-07T03:07:56Z",
        }
    }
    ev = _wire.stored_message(reply)
    assert (ev.kind, ev.seq, ev.outcome) == (RunEventKind.TOOL_COMPLETED, 41, "x")
    history = {
        "seq": 42,
        "subject": "toolexec.event.acme.completed.book.run_1.call_1",
        "header": h,
        "data": base64.b64encode(payload).decode(),
    }
    assert _wire.history_event(history).seq == 42
    with pytest.raises(MalformedAnswerError, match="larger"):
        _wire.history_event({"seq": 43, "subject": "s", "omitted": True})
    assert _wire.parse_header_block(b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB:  x \r\n\r\n") == {
        "A": ["1", "2"],
        "B": ["x"],
    }
    assert _wire.api_error({"error": {"code": 404, "err_code": 10037, "description": "d"}}) == (
        404,
        10037,
        "d",
    )
    assert _wire.api_error({"stream": "S", "seq": 1}) is None


# --- what an answer becomes ------------------------------------------------------------


def event(kind: RunEventKind, **kw: Any) -> RunEvent:
    base: dict[str, Any] = {
        "tenant": "acme",
        "tool": "book",
        "run_id": "run_1",
        "call_id": "call_1",
        "key": KEY,
        "id": "6f1d",
        "source": "/toolexec/executor/a",
    }
    base.update(kw)
    return RunEvent(kind=kind, **base)


def test_answers_become_results_or_errors() -> None:
    done = _result(event(RunEventKind.TOOL_COMPLETED, outcome="K7Q2ZD"))
    assert done == CallResult(
        kind=RunEventKind.TOOL_COMPLETED,
        outcome="K7Q2ZD",
        key=KEY,
        tenant="acme",
        tool="book",
        run_id="run_1",
        call_id="call_1",
        time=None,
    )
    assert not done.deduplicated
    assert _result(event(RunEventKind.TOOL_DEDUPLICATED, outcome="K7Q2ZD")).deduplicated
    ind = event(
        RunEventKind.TOOL_INDETERMINATE,
        reason=IndeterminateReason.HOLDER_LOST,
        body_entered=True,
        error="lease lapsed",
    )
    with pytest.raises(IndeterminateOutcomeError) as e:
        _result(ind)
    assert (e.value.tool, e.value.key, e.value.reason, e.value.body_entered, e.value.detail) == (
        "book",
        KEY,
        IndeterminateReason.HOLDER_LOST,
        True,
        "lease lapsed",
    )
    assert e.value.event is ind
    with pytest.raises(FailedError) as f:
        _result(event(RunEventKind.TOOL_FAILED, code=FailureCode.TOOL_ERROR, error="boom"))
    assert (f.value.code, f.value.message) == (FailureCode.TOOL_ERROR, "boom")
    with pytest.raises(RejectedError) as r:
        _result(
            event(
                RunEventKind.TOOL_REJECTED,
                key=None,
                code=RejectionCode.ARGUMENTS_MISMATCH,
                error="seats changed",
                field="seats",
            )
        )
    assert (r.value.code, r.value.field) == (RejectionCode.ARGUMENTS_MISMATCH, "seats")
    with pytest.raises(MalformedAnswerError):
        _result(event(RunEventKind.TOOL_RESOLVED, action="release"))


def test_errors_with_their_answer_pickle() -> None:
    ind = event(RunEventKind.TOOL_INDETERMINATE, reason="timeout", body_entered=False)
    errors: list[ToolexecError] = [
        IndeterminateOutcomeError(
            tool="book", key=KEY, reason="timeout", body_entered=False, event=ind
        ),
        NoStreamError(tenant="acme", subject="toolexec.call.acme.book.c1"),
        OldExecutorsError(subject="toolexec.call.acme.book.c1", description="x"),
        JetStreamError(code=503, err_code=10077, description="d", subject="s"),
        NoHistoryServiceError(subjects=("toolexec.history.acme", "toolexec.admin.history")),
        NoCatalogServiceError(subject="toolexec.tools.acme"),
        HistoryError(code="forbidden", message="m"),
        CatalogError(code="too_large", message="m"),
        MalformedAnswerError("why", subject="s"),
    ]
    for err in errors:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert str(back) == str(err)
        assert vars(back) == vars(err)


# --- the client's own bookkeeping --------------------------------------------------------


def test_sent_ids_window(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("toolexec.client.time.monotonic", lambda: now[0])
    sent = _SentIDs(120.0)
    k = ("acme", "book", "c1")
    assert sent.count(k) == 0
    sent.add(k)
    assert sent.count(k) == 1
    sent.add(k)
    assert sent.count(k) == 2
    sent.undo(k)
    assert sent.count(k) == 1
    now[0] += 121
    assert sent.count(k) == 0  # an old publication is no reason to wait
    sent.add(k)
    assert sent.count(k) == 1
    sent.undo(k)
    assert sent.count(k) == 0


def test_client_options() -> None:
    nc: Any = object()
    with pytest.raises(ValueError, match="run_id"):
        Client(nc, run_id="a b")
    with pytest.raises(ValueError, match="source"):
        Client(nc, source="has space")
    with pytest.raises(ValueError, match="history"):
        Client(nc, history="sometimes")  # type: ignore[arg-type]
    c = Client(nc)
    assert re.fullmatch(r"run_[0-9a-f]{32}", c.run_id)
    assert c.source == "/toolexec/client/python"
    for bad in ("toolexec.call.>", "toolexec.event.", "toolexec.event.a*.>", "toolexec.event.>.x"):
        with pytest.raises(ValueError, match="watch"):
            c.watch(bad)
    with pytest.raises(ValueError, match="both"):
        c.watch("acme", from_start=True, since=datetime.timedelta(hours=1))
    with pytest.raises(ValueError, match="naive"):
        c.watch("acme", since=datetime.datetime(2026, 1, 1))
    assert c.watch("acme").filter == "toolexec.event.acme.>"
    assert c.watch("").filter == "toolexec.event.>"
    assert c.watch("toolexec.event.*.indeterminate.>").filter == "toolexec.event.*.indeterminate.>"


def test_connect_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", "nats://a:4222, nats://b:4222")
    c: Any = Client.connect(user="s3cret")
    assert c._options == {"servers": ["nats://a:4222", "nats://b:4222"], "token": "s3cret"}
    c = Client.connect("nats://h:1", user="acme", password="pw", name="agent", creds="x.creds")
    assert c._options == {
        "servers": ["nats://h:1"],
        "user": "acme",
        "password": "pw",
        "name": "agent",
        "user_credentials": "x.creds",
    }
    monkeypatch.delenv("NATS_URL")
    assert Client.connect()._options["servers"] == ["nats://127.0.0.1:4222"]
    with pytest.raises(ValueError, match="tls_cert"):
        Client.connect(tls_cert="c.pem")


def test_a_catalog_declaration_is_a_python_tools() -> None:
    @tool(
        idempotency=IdempotencyPolicy(
            Idempotency.EFFECTFUL, key_arguments=("flight",), check_arguments=("seats",)
        ),
        timeout=10,
    )
    def book(flight: str, seats: int, request_id: str) -> str:
        """Book seats."""
        return ""

    decl = ToolDeclaration.from_wire(book.declaration())
    assert decl.kind is Idempotency.EFFECTFUL
    assert decl.key_arguments == ("flight",)
    assert decl.timeout == 10.0
    assert decl.declaration() == book.declaration()
    bare = ToolDeclaration.from_wire({"name": "t", "parameters": {"type": "object"}, "kind": "new"})
    assert bare.kind == "new"
    assert bare.key_arguments is None
    assert not decl.unavailable
    assert "unavailable" not in decl.declaration()
    # The catalog's mark of a tool whose server cannot be reached (§8).
    down = ToolDeclaration.from_wire({**book.declaration(), "unavailable": True})
    assert down.unavailable
    assert down.declaration() == {**book.declaration(), "unavailable": True}
    with pytest.raises(MalformedAnswerError):
        ToolDeclaration.from_wire({"name": "a b"})


# A note: the progress record of a call's body, as an executor stores it
# (docs/PROTOCOL.md §13), on a subject of eight tokens.
NOTE = json.dumps(
    {
        "specversion": "1.0",
        "id": "6f1d3c0e8f2a4b5c9d7e1f2a3b4c5d6e",
        "source": "/toolexec/executor",
        "type": "io.tesserix.toolexec.progress",
        "subject": "book",
        "datacontenttype": "application/json",
        "time": "2026-12-07T05:00:00Z",
        "data": {"tool": "book", "seq": 1, "progress": 1, "total": 2},
        "callid": "call_1",
        "runid": "run_1",
        "tenant": "acme",
    }
).encode()


def test_a_note_is_not_an_answer() -> None:
    """An answer reader skips a note, an event type it does not know: the
    answer filter never matches one, and a watch of every event logs it and
    goes on."""
    headers = {"Content-Type": ["application/cloudevents+json"]}
    subject = "toolexec.event.acme.progress.book.run_1.call_1.1"
    with pytest.raises(MalformedAnswerError):
        _wire.decode_answer(headers, NOTE, subject=subject)
    assert (
        client_module._skip_malformed(lambda: _wire.decode_answer(headers, NOTE, subject=subject))
        is None
    )
    assert not _matches(_wire.answer_filter("acme", "book", "*", "call_1"), subject)


def _matches(subject_filter: str, subject: str) -> bool:
    f, s = subject_filter.split("."), subject.split(".")
    for i, tok in enumerate(f):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(f) == len(s)
