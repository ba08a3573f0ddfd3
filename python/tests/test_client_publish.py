"""How the client publishes a call, against a scripted connection: what a
real server does not do on demand (lose a PubAck) and the order of what the
client sends. A lost PubAck's try is made again marked as a repeat, a 10077
on that try means the first one was stored, and the stored answer is read;
a 10077 on a first publication is looked into once, then refused as taken."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nats.errors
import pytest

from live import run
from toolexec import CallIDTakenError, CallResult, Client, NoAnswerError, RunEventKind

ANSWER_DATA = {"tool": "book", "outcome": "K7Q2ZD"}


def answer_event(call_id: str, kind: str = "completed") -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": "0123456789abcdef0123456789abcdef",
        "source": "/toolexec/executor/ex1",
        "type": f"io.tesserix.toolexec.{kind}",
        "subject": "book",
        "datacontenttype": "application/json",
        "time": "2026-12-07T03:07:56Z",
        "data": ANSWER_DATA,
        "callid": call_id,
        "runid": "run_1",
        "tenant": "acme",
    }


@dataclass
class Reply:
    data: bytes
    headers: dict[str, str] | None = None
    subject: str = ""


@dataclass
class Sub:
    conn: FakeConnection
    subject: str
    cb: Callable[[Any], Awaitable[None]] | None

    async def unsubscribe(self) -> None:
        self.conn.subs.remove(self)


@dataclass
class FakeConnection:
    """What the client asks of a nats-py connection, scripted: each call
    publication takes the next of `pubacks` (a JSON reply, or an exception
    to raise); a message get finds `stored` (None: no message yet)."""

    pubacks: list[Any]
    stored: dict[str, Any] | None = None
    stored_after: int = 0  # how many message gets find nothing first
    sent: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    gets: int = 0
    subs: list[Sub] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=lambda: {"reconnects": 0, "out_msgs": 0})

    async def subscribe(self, subject: str, cb: Any = None, **_: Any) -> Sub:
        sub = Sub(self, subject, cb)
        self.subs.append(sub)
        return sub

    async def request(
        self, subject: str, payload: bytes, timeout: float = 1, headers: Any = None
    ) -> Reply:
        if subject.startswith("toolexec.call."):
            assert self.subs, "the client publishes before it subscribes"
            self.sent.append((subject, dict(headers or {})))
            step = self.pubacks.pop(0)
            if isinstance(step, BaseException):
                raise step
            return Reply(json.dumps(step).encode())
        if subject.startswith("$JS.API.STREAM.MSG.GET."):
            self.gets += 1
            if self.stored is None or self.gets <= self.stored_after:
                return Reply(
                    b'{"error":{"code":404,"err_code":10037,"description":"no message found"}}'
                )
            data = json.dumps(self.stored).encode()
            hdrs = b"NATS/1.0\r\nContent-Type: application/cloudevents+json\r\n\r\n"
            message = {
                "subject": "toolexec.event.acme.completed.book.run_1.x",
                "seq": 9,
                "hdrs": base64.b64encode(hdrs).decode(),
                "data": base64.b64encode(data).decode(),
            }
            return Reply(json.dumps({"message": message}).encode())
        raise AssertionError(f"unexpected request on {subject}")


PUBACK = {"stream": "TOOLEXEC_CALLS_V2", "seq": 1}
PENDING = {
    "error": {
        "code": 503,
        "err_code": 10077,
        "description": "maximum messages per subject exceeded",
    }
}


def client(conn: FakeConnection) -> Client:
    c: Any = conn
    return Client(c, run_id="run_1")


def test_a_lost_puback_is_tried_again_as_a_repeat() -> None:
    conn = FakeConnection(pubacks=[nats.errors.TimeoutError(), PUBACK])

    async def main() -> CallResult:
        cl = client(conn)
        task = asyncio.create_task(cl.call("acme", "book", {}, call_id=None, timeout=5))
        await asyncio.sleep(0.3)  # the second try is stored; its answer is looked for
        conn.stored = answer_event("whatever")
        return await task

    result = run(main())
    (s1, h1), (s2, h2) = conn.sent
    assert s1 == s2
    assert "Toolexec-Repeat" not in h1
    assert h2["Toolexec-Repeat"] == "true"
    assert h2["Nats-Expected-Stream"] == "TOOLEXEC_CALLS_V2"
    assert result.outcome == "K7Q2ZD"
    assert conn.gets >= 1
    assert conn.subs == []


def test_a_10077_after_a_lost_puback_means_stored() -> None:
    conn = FakeConnection(
        pubacks=[nats.errors.TimeoutError(), PENDING], stored=answer_event("c"), stored_after=1
    )
    result = run(client(conn).call("acme", "book", {}, timeout=5))
    assert result.kind is RunEventKind.TOOL_COMPLETED
    assert len(conn.sent) == 2
    assert conn.gets >= 2  # looked until the answer was stored


def test_a_10077_on_a_first_publication() -> None:
    # Another publisher's call waits under the id: looked into for a moment
    # (its answer may be on its way into the stream), then refused.
    conn = FakeConnection(pubacks=[PENDING])
    with pytest.raises(CallIDTakenError):
        run(client(conn).call("acme", "book", {}, call_id="mine", timeout=5))
    assert 2 <= conn.gets <= 8
    assert conn.sent[0][1]["Toolexec-Repeat"] == "true"  # a chosen id may repeat
    # That call was answered a moment ago: its stored answer is the answer.
    conn = FakeConnection(pubacks=[PENDING], stored=answer_event("mine"))
    assert run(client(conn).call("acme", "book", {}, call_id="mine")).outcome == "K7Q2ZD"
    # This client's own call waits under the id: wait for its answer.
    conn = FakeConnection(pubacks=[PUBACK, PENDING], stored=answer_event("mine"), stored_after=2)

    async def twice() -> list[CallResult]:
        cl = client(conn)
        first = asyncio.create_task(cl.call("acme", "book", {}, call_id="mine", timeout=5))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(cl.call("acme", "book", {}, call_id="mine", timeout=5))
        return list(await asyncio.gather(first, second))

    assert [r.outcome for r in run(twice())] == ["K7Q2ZD", "K7Q2ZD"]


def test_the_timeout_bounds_the_tries() -> None:
    conn = FakeConnection(pubacks=[nats.errors.TimeoutError() for _ in range(100)])
    with pytest.raises(NoAnswerError) as e:
        run(client(conn).call("acme", "book", {}, call_id="c1", timeout=0.5))
    assert (e.value.tenant, e.value.tool, e.value.run_id, e.value.call_id) == (
        "acme",
        "book",
        "run_1",
        "c1",
    )
    assert len(conn.sent) > 1
    assert all(h["Toolexec-Repeat"] == "true" for _, h in conn.sent)
    assert conn.subs == []


def test_after_a_reconnection_the_stored_answer_is_looked_for() -> None:
    """An answer published while the connection was down was not heard: when
    the connection is made again, the call looks for the stored one."""
    conn = FakeConnection(pubacks=[PUBACK], stored=answer_event("c"))

    async def main() -> tuple[int, CallResult]:
        task = asyncio.create_task(client(conn).call("acme", "book", {}, timeout=5))
        await asyncio.sleep(0.5)
        looked_before = conn.gets  # a fresh call id: nothing to look for yet
        conn.stats["reconnects"] += 1
        return looked_before, await task

    looked_before, result = run(main())
    assert looked_before == 0
    assert conn.gets >= 1
    assert result.outcome == "K7Q2ZD"
