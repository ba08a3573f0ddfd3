"""toolexec.Client against a real executor (`executor --demo`, built from this
repository, its embedded NATS on a free port: the session's `executor`
fixture). The tool bodies are Go's: the demo airline's book, lookup_fare and
update_profile, and two HTTP tools whose downstream the tests hold (hold) or
have refuse (refuse). Each test works in a run of its own."""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from typing import Any

import pytest

from live import Executor, run
from toolexec import (
    CallIDTakenError,
    CallResult,
    Client,
    FailedError,
    FailureCode,
    Idempotency,
    IndeterminateOutcomeError,
    IndeterminateReason,
    NoAnswerError,
    RejectedError,
    RejectionCode,
    RunEvent,
    RunEventKind,
    idempotency_key,
)


def fresh(prefix: str) -> str:
    """A token no other test (or session) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def flight() -> str:
    """A flight number of the demo's pattern that no other test books."""
    return "PY" + str(uuid.uuid4().int % 10_000)


def book_key(run_id: str, flight_no: str) -> str:
    """The key the executors derive for a booking: book's key argument is
    the flight alone."""
    return idempotency_key(
        tenant="acme",
        run_id=run_id,
        tool="book",
        arguments={"flight": flight_no},
        key_arguments=("flight",),
    )


async def wait_until(cond: Any, what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


# --- the three signals, and the other two answers --------------------------------------


def test_completed_then_deduplicated(executor: Executor) -> None:
    run_id, f = fresh("run"), flight()
    before = executor.bodies("book")

    async def main() -> tuple[CallResult, CallResult]:
        async with Client.connect(executor.url, run_id=run_id) as client:
            first = await client.call("acme", "book", {"flight": f, "seats": 1, "request_id": "a"})
            retry = await client.call("acme", "book", {"flight": f, "seats": 1, "request_id": "b"})
            return first, retry

    first, retry = run(main())
    assert first.kind is RunEventKind.TOOL_COMPLETED
    assert not first.deduplicated
    assert retry.kind is RunEventKind.TOOL_DEDUPLICATED
    assert retry.deduplicated
    assert retry.outcome == first.outcome
    assert len(first.outcome) == 6  # a PNR
    # The executor's key is the one toolexec.keys derives.
    assert first.key == retry.key == book_key(run_id, f)
    assert (first.tenant, first.tool, first.run_id) == ("acme", "book", run_id)
    assert first.call_id != retry.call_id
    assert first.call_id.startswith("call_")
    assert len(first.call_id) == 37
    assert isinstance(first.time, datetime.datetime)
    assert first.time.tzinfo is not None
    # The airline's body ran once for the two calls.
    assert executor.bodies("book") - before == 1


def test_indeterminate(executor: Executor) -> None:
    run_id, f = fresh("run"), flight()
    before = executor.bodies("book")

    async def main() -> tuple[IndeterminateOutcomeError, IndeterminateOutcomeError]:
        async with Client.connect(executor.url, run_id=run_id) as client:
            with pytest.raises(IndeterminateOutcomeError) as lost:
                await client.call(
                    "acme",
                    "book",
                    {"flight": f, "seats": 1, "request_id": "a", "fail_after_effect": True},
                )
            # The retry a careful agent would make: same flight, fresh request id.
            with pytest.raises(IndeterminateOutcomeError) as again:
                await client.call("acme", "book", {"flight": f, "seats": 1, "request_id": "b"})
            return lost.value, again.value

    lost, again = run(main())
    key = book_key(run_id, f)
    for err in (lost, again):
        assert err.tool == "book"
        assert err.key == key
        assert err.reason is IndeterminateReason.BODY_FAILED
        assert err.body_entered is True
        assert err.event is not None
        assert err.event.kind is RunEventKind.TOOL_INDETERMINATE
        assert err.event.run_id == run_id
        assert "book" in str(err)
        assert key in str(err)
    assert lost.event is not None
    assert again.event is not None
    assert lost.event.call_id != again.event.call_id
    # The booking landed once; the retry did not book a second seat.
    assert executor.bodies("book") - before == 1
    record = executor.emitter_json("inspect", "--tenant", "acme", "--key", key)
    assert record["state"] == "indeterminate"
    assert record["call_id"] == lost.event.call_id


def test_rejected_by_the_executor(executor: Executor) -> None:
    run_id = fresh("run")

    async def main() -> list[RejectedError]:
        async with Client.connect(executor.url, run_id=run_id) as client:
            errors = []
            for tool, args in (
                ("no_such_tool", {}),
                ("book", {"flight": flight(), "seats": 0, "request_id": "a"}),
                ("book", '{"flight":"PY1","flight":"PY2","seats":1,"request_id":"a"}'),
            ):
                with pytest.raises(RejectedError) as e:
                    await client.call("acme", tool, args)
                errors.append(e.value)
            return errors

    unknown, schema, duplicate = run(main())
    assert unknown.code is RejectionCode.UNKNOWN_TOOL
    assert unknown.tool == "no_such_tool"
    assert schema.code is RejectionCode.SCHEMA_VIOLATION
    assert duplicate.code is RejectionCode.DUPLICATE_MEMBER
    for err in (unknown, schema, duplicate):
        assert err.event is not None
        assert err.event.kind is RunEventKind.TOOL_REJECTED
        assert err.event.run_id == run_id


def test_failed(executor: Executor) -> None:
    async def main() -> FailedError:
        async with Client.connect(executor.url) as client:
            with pytest.raises(FailedError) as e:
                await client.call("acme", "refuse", {"why": "full"})
            return e.value

    err = run(main())
    assert err.tool == "refuse"
    assert err.code is FailureCode.NO_EFFECT
    assert "409" in err.message
    assert err.event is not None
    assert err.event.kind is RunEventKind.TOOL_FAILED


BAD_CALLS = [
    # (tenant, tool, run, arguments): code, field, and whether emitter call
    # refuses the same call before publishing it (exit status 2).
    ("a b", "book", "r1", {}, RejectionCode.BAD_TOKEN, "tenant"),
    ("acme", "bo.ok", "r1", {}, RejectionCode.BAD_TOKEN, "subject"),
    ("acme", "book", "r*", {}, RejectionCode.BAD_TOKEN, "runid"),
    ("acme", "book", "r" * 129, {}, RejectionCode.BAD_TOKEN, "runid"),
    ("acme", "book", "r1", "[1, 2]", RejectionCode.ARGUMENTS_NOT_OBJECT, "arguments"),
    ("acme", "book", "r1", '"flight"', RejectionCode.ARGUMENTS_NOT_OBJECT, "arguments"),
    ("acme", "book", "r1", '{"flight": ', RejectionCode.BAD_DATA, "arguments"),
    ("acme", "book", "r1", "{} {}", RejectionCode.BAD_DATA, "arguments"),
]


@pytest.mark.parametrize(
    "bad", BAD_CALLS, ids=[f"{c[4].value}-{c[5]}-{i}" for i, c in enumerate(BAD_CALLS)]
)
def test_malformed_calls_are_refused_before_sending(
    executor: Executor, bad: tuple[str, str, str, Any, RejectionCode, str]
) -> None:
    tenant, tool, run_id, arguments, code, field = bad

    async def main() -> tuple[RejectedError, int]:
        async with Client.connect(executor.url) as client:
            sent = client.nc.stats["out_msgs"]
            with pytest.raises(RejectedError) as e:
                await client.call(tenant, tool, arguments, run_id=run_id)
            return e.value, client.nc.stats["out_msgs"] - sent

    err, published = run(main())
    assert (err.code, err.field, err.event) == (code, field, None)
    assert published == 0
    # The Go client (emitter call) refuses the same call before publishing it.
    args = arguments if isinstance(arguments, str) else "{}"
    rc, out = executor.emitter_run(
        "call", "--tenant", tenant, "--tool", tool, "--run", run_id, "--args", args
    )
    assert rc == 2, out


def test_python_values_without_json_are_refused(executor: Executor) -> None:
    async def main() -> list[RejectedError]:
        async with Client.connect(executor.url) as client:
            errors = []
            for args in (
                {"x": float("nan")},
                {"x": {1, 2}},
                {1: "a"},
                {"x": "\ud800"},
                b'{"x":"\xff"}',
                ["a"],
            ):
                with pytest.raises(RejectedError) as e:
                    await client.call("acme", "book", args)  # type: ignore[arg-type]
                errors.append(e.value)
            return errors

    codes = [e.code for e in run(main())]
    assert codes == [
        RejectionCode.INVALID_JSON,
        RejectionCode.INVALID_JSON,
        RejectionCode.INVALID_JSON,
        RejectionCode.INVALID_UNICODE,
        RejectionCode.INVALID_UNICODE,
        RejectionCode.ARGUMENTS_NOT_OBJECT,
    ]


# --- the storm -----------------------------------------------------------------------

STORM = 100


def test_duplicate_storm(executor: Executor) -> None:
    """100 identical effectful calls at once, each with a call id of its own
    and a fresh request id, one key: one completed, 99 deduplicated, the
    airline's body entered once."""
    run_id, f = fresh("storm"), flight()
    before = executor.bodies("book")

    async def caller(client: Client, n: int) -> CallResult:
        return await client.call(
            "acme", "book", {"flight": f, "seats": 2, "request_id": f"req-{n}"}, timeout=30
        )

    async def main() -> list[CallResult]:
        clients = [await Client.connect(executor.url, run_id=run_id) for _ in range(4)]
        try:
            return await asyncio.gather(
                *(caller(clients[n % len(clients)], n) for n in range(STORM))
            )
        finally:
            for c in clients:
                await c.close()

    start = time.monotonic()
    results = run(main())
    elapsed = time.monotonic() - start
    kinds = [r.kind for r in results]
    completed = [r for r in results if r.kind is RunEventKind.TOOL_COMPLETED]
    print(
        f"STORM: {len(results)} calls, {len(completed)} completed, "
        f"{kinds.count(RunEventKind.TOOL_DEDUPLICATED)} deduplicated, "
        f"{executor.bodies('book') - before} body entered, {elapsed:.2f} s"
    )
    assert kinds.count(RunEventKind.TOOL_COMPLETED) == 1
    assert kinds.count(RunEventKind.TOOL_DEDUPLICATED) == STORM - 1
    assert len({r.call_id for r in results}) == STORM
    assert {r.outcome for r in results} == {completed[0].outcome}
    assert {r.key for r in results} == {book_key(run_id, f)}
    assert executor.bodies("book") - before == 1
    record = executor.emitter_json("inspect", "--tenant", "acme", "--key", book_key(run_id, f))
    assert record["state"] == "completed"
    assert record["outcome"] == completed[0].outcome
    assert record["call_id"] == completed[0].call_id


# --- call ids ----------------------------------------------------------------------


def test_chosen_call_id_twice_runs_once(executor: Executor) -> None:
    """A tenant, tool and call id name one call: calling again with the id
    gets the first answer, and nothing runs again, not even a read-only
    tool, which would otherwise run on every call; whoever calls again
    (another client, the emitter)."""
    run_id = fresh("run")
    fare_id, book_id = fresh("fare"), fresh("booking")
    fares, books = executor.bodies("lookup_fare"), executor.bodies("book")

    async def main() -> list[CallResult]:
        async with (
            Client.connect(executor.url, run_id=run_id) as one,
            Client.connect(executor.url, run_id=run_id) as other,
        ):
            args = {"flight": "BA117"}
            booking = {"flight": flight(), "seats": 1, "request_id": "a"}
            return [
                await one.call("acme", "lookup_fare", args, call_id=fare_id),
                await one.call("acme", "lookup_fare", args, call_id=fare_id),
                await other.call("acme", "lookup_fare", args, call_id=fare_id),
                await one.call("acme", "book", booking, call_id=book_id),
                await one.call("acme", "book", {**booking, "request_id": "b"}, call_id=book_id),
            ]

    fare1, fare2, fare3, book1, book2 = run(main())
    assert fare1 == fare2 == fare3  # the same answer, its time included
    assert fare1.kind is RunEventKind.TOOL_COMPLETED
    assert fare1.call_id == fare_id
    assert fare1.outcome == "GBP 612.40"
    assert book1 == book2
    assert book1.kind is RunEventKind.TOOL_COMPLETED
    # The emitter, with the same call id, gets the same answer too.
    answer = executor.emitter_json(
        "call", "--tenant", "acme", "--tool", "book", "--run", run_id, "--call-id", book_id
    )
    assert (answer["kind"], answer["outcome"], answer["call_id"]) == (
        "completed",
        book1.outcome,
        book_id,
    )
    assert executor.bodies("lookup_fare") - fares == 1
    assert executor.bodies("book") - books == 1


def test_waiting_call_id_from_another_client_is_taken(executor: Executor) -> None:
    """While a call waits (its body running), another client's call with the
    same tenant, tool and id is refused at once; the same client's is a wait
    for that call's answer."""
    assert executor.downstream is not None
    downstream = executor.downstream
    ticket, call_id = fresh("ticket"), fresh("held")

    async def main() -> tuple[CallResult, CallResult, CallIDTakenError, float, int]:
        async with (
            Client.connect(executor.url) as owner,
            Client.connect(executor.url) as stranger,
        ):
            first = asyncio.create_task(
                owner.call("acme", "hold", {"ticket": ticket}, call_id=call_id)
            )
            await wait_until(lambda: downstream.held(ticket) == 1, "the body runs")
            again = asyncio.create_task(
                owner.call("acme", "hold", {"ticket": ticket}, call_id=call_id)
            )
            start = time.monotonic()
            with pytest.raises(CallIDTakenError) as taken:
                await stranger.call("acme", "hold", {"ticket": ticket}, call_id=call_id)
            refused_in = time.monotonic() - start
            # The Go client says the same: exit status 5, not stored.
            rc, _ = await asyncio.to_thread(
                executor.emitter_run,
                "call",
                "--tenant",
                "acme",
                "--tool",
                "hold",
                "--call-id",
                call_id,
                "--args",
                f'{{"ticket":"{ticket}"}}',
            )
            assert not first.done()
            assert not again.done()
            downstream.release(ticket)
            return await first, await again, taken.value, refused_in, rc

    first, again, taken, refused_in, emitter_rc = run(main())
    assert (taken.tenant, taken.tool, taken.call_id) == ("acme", "hold", call_id)
    assert refused_in < 2.0
    assert emitter_rc == 5
    assert first.outcome == f"held {ticket}"
    assert again == first
    assert downstream.held(ticket) == 1


def test_timeout_then_attach(executor: Executor) -> None:
    assert executor.downstream is not None
    downstream = executor.downstream
    ticket = fresh("ticket")

    async def main() -> tuple[NoAnswerError, float, CallResult, CallResult, NoAnswerError]:
        async with Client.connect(executor.url) as client:
            start = time.monotonic()
            with pytest.raises(NoAnswerError) as e:
                await client.call("acme", "hold", {"ticket": ticket}, timeout=1.0)
            waited = time.monotonic() - start
            err = e.value
            # Attach while the call still runs: the answer is heard as it comes.
            live = asyncio.create_task(
                client.attach(err.tenant, err.tool, err.run_id, err.call_id, timeout=30)
            )
            await asyncio.sleep(0.3)
            assert not live.done()
            downstream.release(ticket)
            heard = await live
        # Later, from another connection: the stored answer.
        async with Client.connect(executor.url) as later:
            stored = await later.attach(err.tenant, err.tool, err.run_id, err.call_id)
            with pytest.raises(NoAnswerError) as none:
                await later.attach("acme", "hold", err.run_id, fresh("never"), timeout=0.5)
        return err, waited, heard, stored, none.value

    err, waited, heard, stored, none = run(main())
    assert (err.tenant, err.tool) == ("acme", "hold")
    assert 1.0 <= waited < 3.0
    assert heard.kind is RunEventKind.TOOL_COMPLETED
    assert heard.outcome == f"held {ticket}"
    assert heard.call_id == err.call_id
    assert heard.run_id == err.run_id
    assert stored == heard
    assert none.tool == "hold"


def test_cancelled_call_leaves_nothing_behind(executor: Executor) -> None:
    """A call cancelled while it waits lets go of its subscription; the call
    itself was stored, still runs, and is answered."""
    assert executor.downstream is not None
    downstream = executor.downstream
    ticket, call_id = fresh("ticket"), fresh("cancelled")

    def answer_subscriptions(client: Client) -> int:
        # nats-py's own table of the connection's subscriptions (the shared
        # inbox of its requests is one too; it stays).
        return sum(s.subject.startswith("toolexec.event.") for s in client.nc._subs.values())

    async def main() -> tuple[int, int, CallResult]:
        async with Client.connect(executor.url) as client:
            task = asyncio.create_task(
                client.call("acme", "hold", {"ticket": ticket}, call_id=call_id)
            )
            await wait_until(lambda: downstream.held(ticket) == 1, "the body runs")
            during = answer_subscriptions(client)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            after = answer_subscriptions(client)
            downstream.release(ticket)
            result = await client.attach("acme", "hold", client.run_id, call_id)
            return during, after, result

    during, after, result = run(main())
    assert during == 1
    assert after == 0
    assert result.outcome == f"held {ticket}"


# --- watching ------------------------------------------------------------------------


def test_watch_sees_the_kinds(executor: Executor) -> None:
    run_id, f = fresh("watched"), flight()
    subject_filter = f"toolexec.event.acme.*.*.{run_id}.*"
    want = [
        RunEventKind.TOOL_COMPLETED,
        RunEventKind.TOOL_DEDUPLICATED,
        RunEventKind.TOOL_INDETERMINATE,
        RunEventKind.TOOL_FAILED,
        RunEventKind.TOOL_REJECTED,
    ]

    async def calls(client: Client) -> None:
        await client.call("acme", "book", {"flight": f, "seats": 1, "request_id": "a"})
        await client.call("acme", "book", {"flight": f, "seats": 1, "request_id": "b"})
        with pytest.raises(IndeterminateOutcomeError):
            await client.call(
                "acme",
                "book",
                {"flight": flight(), "seats": 1, "request_id": "c", "fail_after_effect": True},
            )
        with pytest.raises(FailedError):
            await client.call("acme", "refuse", {})
        with pytest.raises(RejectedError):
            await client.call("acme", "book", {"flight": "nope"})

    async def take(events: Any, n: int) -> list[RunEvent]:
        out: list[RunEvent] = []
        async for event in events:
            out.append(event)
            if len(out) == n:
                break
        return out

    async def main() -> tuple[list[RunEvent], list[RunEvent], list[RunEvent]]:
        async with Client.connect(executor.url, run_id=run_id) as client:
            async with client.watch(subject_filter) as events:
                await calls(client)
                live = await take(events, len(want))
            async with client.watch(subject_filter, from_start=True) as events:
                stored = await take(events, len(want))
            async with client.watch(subject_filter, since=datetime.timedelta(minutes=5)) as events:
                since = await take(events, len(want))
            return live, stored, since

    live, stored, since = run(main())
    for events in (live, stored, since):
        assert [e.kind for e in events] == want
        assert all(isinstance(e.kind, RunEventKind) for e in events)
        assert all(e.run_id == run_id and e.tenant == "acme" for e in events)
    assert [e.id for e in stored] == [e.id for e in live]
    seqs = [e.seq or 0 for e in stored]
    assert all(s > 0 for s in seqs)
    assert seqs == sorted(seqs)
    completed, deduplicated, indeterminate, failed, rejected = live
    assert deduplicated.outcome == completed.outcome
    assert deduplicated.key == completed.key == book_key(run_id, f)
    assert indeterminate.reason is IndeterminateReason.BODY_FAILED
    assert indeterminate.body_entered is True
    assert failed.code is FailureCode.NO_EFFECT
    assert rejected.code is RejectionCode.SCHEMA_VIOLATION


# --- the catalog ------------------------------------------------------------------------


def test_tools(executor: Executor) -> None:
    async def main() -> list[Any]:
        async with Client.connect(executor.url) as client:
            return await client.tools("acme")

    tools = run(main())
    names = [t.name for t in tools]
    assert names == sorted(names)
    assert names == ["book", "hold", "lookup_fare", "refuse", "update_profile"]
    book = tools[0]
    assert book.kind is Idempotency.EFFECTFUL
    assert book.key_arguments == ("flight",)
    assert book.check_arguments == ("seats",)
    assert book.timeout == 10.0
    assert book.parameters["type"] == "object"
    assert set(book.parameters["properties"]) == {
        "flight",
        "seats",
        "request_id",
        "fail_after_effect",
    }
    decl = book.declaration()
    assert decl["kind"] == "effectful"
    assert decl["timeout_ms"] == 10_000
    fare = tools[2]
    assert fare.kind is Idempotency.READ_ONLY
    assert fare.key_arguments is None


# --- across languages ------------------------------------------------------------------


def test_python_and_emitter_calls_deduplicate_each_other(executor: Executor) -> None:
    run_id = fresh("mixed")
    first_py, first_go = flight(), flight()
    before = executor.bodies("book")

    def emitter_book(f: str, request_id: str) -> dict[str, Any]:
        args = f'{{"flight":"{f}","seats":1,"request_id":"{request_id}"}}'
        return executor.emitter_json(
            "call", "--tenant", "acme", "--tool", "book", "--run", run_id, "--args", args
        )

    async def main() -> tuple[CallResult, dict[str, Any], dict[str, Any], CallResult]:
        async with Client.connect(executor.url, run_id=run_id) as client:
            py = await client.call(
                "acme", "book", {"flight": first_py, "seats": 1, "request_id": "py"}
            )
            go_after_py = await asyncio.to_thread(emitter_book, first_py, "go")
            go = await asyncio.to_thread(emitter_book, first_go, "go")
            py_after_go = await client.call(
                "acme", "book", {"flight": first_go, "seats": 1, "request_id": "py"}
            )
            return py, go_after_py, go, py_after_go

    py, go_after_py, go, py_after_go = run(main())
    assert py.kind is RunEventKind.TOOL_COMPLETED
    assert go_after_py["kind"] == "deduplicated"
    assert (go_after_py["outcome"], go_after_py["key"]) == (py.outcome, py.key)
    assert go["kind"] == "completed"
    assert py_after_go.kind is RunEventKind.TOOL_DEDUPLICATED
    assert (py_after_go.outcome, py_after_go.key) == (go["outcome"], go["key"])
    assert executor.bodies("book") - before == 2
