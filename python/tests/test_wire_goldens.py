"""The package against the Go side's goldens of the wire
(tests/wire/testdata/golden, of the wire version its WIRE_VERSION names):
the client writes the golden call byte for byte, and reads every golden
answer, in both modes, every stored event of the golden history reply and
every declaration of the golden catalog reply, as the goldens say. So a
Python caller keeps working with executors whose answers are the goldens."""

from __future__ import annotations

import base64
import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from toolexec import MalformedAnswerError, RunEvent, ToolDeclaration, _wire

GOLDEN = REPO / "tests" / "wire" / "testdata" / "golden"


def read_msg(path: Path) -> tuple[str, dict[str, list[str]], bytes]:
    """A golden message: the subject line, "Name: value" header lines, an
    empty line, then the payload and a newline that is not part of it."""
    raw = path.read_bytes()
    head, sep, data = raw.partition(b"\n\n")
    assert sep, f"{path} is not a golden message: no empty line after the headers"
    assert data.endswith(b"\n"), f"{path} is not a golden message: no newline after the payload"
    subject, *lines = head.decode("utf-8").split("\n")
    headers: dict[str, list[str]] = {}
    for line in lines:
        name, _, value = line.partition(": ")
        headers.setdefault(name, []).append(value)
    return subject, headers, data[:-1]


def golden_time(s: str) -> datetime.datetime:
    """An RFC 3339 time of a golden, cut to microseconds as Python keeps it."""
    m = re.fullmatch(r"(.+T\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z", s)
    assert m, s
    frac = ((m.group(2) or "") + "000000")[:6]
    return datetime.datetime.fromisoformat(f"{m.group(1)}.{frac}+00:00")


def expected(event: dict[str, Any], subject: str, seq: int | None = None) -> dict[str, Any]:
    """What a reader makes of a structured golden answer, member by member."""
    data = event["data"]
    return {
        "kind": event["type"].removeprefix("io.tesserix.toolexec."),
        "tenant": event["tenant"],
        "tool": event.get("subject", data.get("tool")),
        "run_id": event.get("runid"),
        "call_id": event.get("callid"),
        "key": event.get("idempotencykey", data.get("key")),
        "outcome": data.get("outcome"),
        "error": data.get("error"),
        "code": data.get("code"),
        "field": data.get("field"),
        "reason": data.get("reason"),
        "body_entered": data.get("body_entered"),
        "action": data.get("action"),
        "operator": data.get("operator"),
        "time": golden_time(event["time"]),
        "id": event["id"],
        "source": event["source"],
        "subject": subject,
        "seq": seq,
        "traceparent": event.get("traceparent"),
        "tracestate": event.get("tracestate"),
    }


def as_read(ev: RunEvent, names: dict[str, Any]) -> dict[str, Any]:
    """The named fields of a RunEvent as plain values (enums as their wire
    strings)."""
    out: dict[str, Any] = {}
    for name in names:
        v = getattr(ev, name)
        if name == "kind":
            v = v.wire_kind
        elif name in ("code", "reason") and v is not None:
            v = str(v)
        out[name] = v
    return out


ANSWERS = sorted(p.name.split(".")[0] for p in (GOLDEN / "answers").glob("*.structured.msg"))


def test_the_goldens_are_there() -> None:
    assert ANSWERS, f"no golden answers under {GOLDEN}"
    assert (GOLDEN / "WIRE_VERSION").read_text().strip()


@pytest.mark.parametrize("kind", ANSWERS)
@pytest.mark.parametrize("mode", ["structured", "binary"])
def test_golden_answers_are_read(kind: str, mode: str) -> None:
    _, _, structured = read_msg(GOLDEN / "answers" / f"{kind}.structured.msg")
    subject, headers, data = read_msg(GOLDEN / "answers" / f"{kind}.{mode}.msg")
    ev = _wire.decode_answer(headers, data, subject=subject)
    want = expected(json.loads(structured), subject)
    assert as_read(ev, want) == want


def test_golden_call_is_written() -> None:
    """The client writes the Go side's golden call byte for byte, with its
    headers (but Toolexec-Interactions: the Python client declares none)."""
    _, headers, data = read_msg(GOLDEN / "calls" / "call.structured.msg")
    event = json.loads(data)
    # The arguments as sent, byte for byte: cut from the payload.
    head = data.index(b'"data":{"arguments":') + len(b'"data":{"arguments":')
    tail = data.index(b'},"runid":')
    written = _wire.call_event(
        tenant=event["tenant"],
        tool=event["subject"],
        run_id=event["runid"],
        call_id=event["id"],
        source=event["source"],
        arguments=data[head:tail],
        time=golden_time(event["time"]),
        traceparent=event["traceparent"],
        tracestate=event["tracestate"],
    )
    assert written == data
    sent = _wire.call_headers(repeat=True, traceparent=event["traceparent"])
    assert {k: [v] for k, v in sent.items()} == {
        k: v for k, v in headers.items() if k != "Toolexec-Interactions"
    }


def test_golden_history_is_read() -> None:
    reply = json.loads((GOLDEN / "history" / "response.json").read_bytes())
    first, omitted = reply["events"]
    ev = _wire.history_event(first)
    stored = json.loads(base64.b64decode(first["data"]))
    want = expected(stored, first["subject"], first["seq"])
    assert as_read(ev, want) == want
    with pytest.raises(MalformedAnswerError):
        _wire.history_event(omitted)


def test_golden_catalog_is_read() -> None:
    reply = json.loads((GOLDEN / "catalog" / "response.json").read_bytes())
    for d in reply["tools"]:
        decl = ToolDeclaration.from_wire(d)
        assert decl.declaration() == d
