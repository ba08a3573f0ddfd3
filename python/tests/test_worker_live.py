"""Python workers against a real executor: the session's `workers_executor`
(built from this repository, no tools of its own, its embedded NATS on a free
port), which learns the workers' tools every 200 ms. The bodies are Python's,
served by toolexec.Worker in this process or in a process of its own
(workerproc.py); the calls come from Python (toolexec.Client) or from Go
(`emitter bench`). Each test serves tools of its own names, in runs of its own.

The other direction, a Go body called from Python, is test_client_live.py's
(the demo airline's book, test_duplicate_storm among them)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg

from live import Executor, Process, clean_env, run
from toolexec import (
    CallResult,
    Client,
    FailedError,
    FailureCode,
    Idempotency,
    IdempotencyPolicy,
    IndeterminateOutcomeError,
    IndeterminateReason,
    NoEffect,
    RejectedError,
    RejectionCode,
    RunEventKind,
    Tool,
    ToolContext,
    ToolDeclaration,
    Worker,
    idempotency_key,
    tool,
)

STORM = 100
BOOK = IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flight",))
WORKERPROC = Path(__file__).with_name("workerproc.py")


def fresh(prefix: str) -> str:
    """A token no other test (or session) uses: a tool name, a run id."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def flight() -> str:
    return "PY" + str(uuid.uuid4().int % 10_000)


def key_of(run_id: str, tool_name: str, flight_no: str) -> str:
    return idempotency_key(
        tenant="acme",
        run_id=run_id,
        tool=tool_name,
        arguments={"flight": flight_no},
        key_arguments=("flight",),
    )


async def served(client: Client, name: str, limit: float = 15.0) -> ToolDeclaration:
    """Waits until the executors' catalog lists the tool (they learned it
    from a worker), and returns its declaration there."""
    deadline = time.monotonic() + limit
    while True:
        for d in await client.tools("acme"):
            if d.name == name:
                return d
        if time.monotonic() > deadline:
            raise AssertionError(f"the executor did not learn {name} within {limit}s")
        await asyncio.sleep(0.05)


async def wait_until(cond: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def start_worker(
    work: Path, label: str, url: str, name: str, entries: Path, *, hold: float, timeout: float
) -> Process:
    """workerproc.py in a process (and session) of its own, serving name."""
    argv = [sys.executable, str(WORKERPROC), url, name, str(entries), str(hold), str(timeout)]
    proc = Process(label, argv, cwd=work, env=clean_env())
    proc.await_line(r"serving \S+ as toolexec-worker \w+")
    return proc


def booking_tool(name: str, entered: list[str], hold: float = 0.2) -> Tool[..., Any]:
    """An effectful book tool of this name, served in this process: each
    entry into its body is appended to entered (the request id)."""

    async def book(flight: str, request_id: str, ctx: ToolContext) -> str:
        """Book a seat.

        Args:
            flight: Flight number.
            request_id: Fresh on every attempt, hence no key argument.
        """
        entered.append(request_id)
        await asyncio.sleep(hold)  # the duplicates arrive while it runs
        assert ctx.idempotency_key is not None
        return "PNR-" + ctx.idempotency_key[:6].upper()

    return tool(idempotency=BOOK, name=name, timeout=10)(book)


# --- duplicate storms ------------------------------------------------------------------


def test_storm_python_caller_python_body(workers_executor: Executor) -> None:
    """100 identical effectful calls at once from Python (each with a call id
    and a request id of its own, one key), the body served by a Python worker:
    one completed, 99 deduplicated, the body entered once."""
    ex = workers_executor
    name, run_id, f = fresh("book"), fresh("storm"), flight()
    entered: list[str] = []
    book = booking_tool(name, entered)

    async def main() -> tuple[list[CallResult], float]:
        async with Worker.connect(book, servers=ex.url):
            clients = [await Client.connect(ex.url, run_id=run_id) for _ in range(4)]
            try:
                await served(clients[0], name)
                start = time.monotonic()
                results = await asyncio.gather(
                    *(
                        clients[n % 4].call("acme", name, {"flight": f, "request_id": f"req-{n}"})
                        for n in range(STORM)
                    )
                )
                return results, time.monotonic() - start
            finally:
                for c in clients:
                    await c.close()

    results, elapsed = run(main())
    kinds = [r.kind for r in results]
    completed = kinds.count(RunEventKind.TOOL_COMPLETED)
    deduplicated = kinds.count(RunEventKind.TOOL_DEDUPLICATED)
    print(
        f"STORM python->python: {len(results)} calls, {completed} completed, {deduplicated} "
        f"deduplicated, body entered {len(entered)} time(s) (executor: "
        f"{ex.bodies(name)}), {elapsed:.2f} s"
    )
    assert (completed, deduplicated) == (1, STORM - 1)
    assert len(entered) == 1
    assert ex.bodies(name) == 1
    key = key_of(run_id, name, f)
    assert {r.key for r in results} == {key}
    assert {r.outcome for r in results} == {"PNR-" + key[:6].upper()}
    assert len({r.call_id for r in results}) == STORM


def test_storm_go_caller_python_body(workers_executor: Executor, tmp_path: Path) -> None:
    """The same storm from Go: `emitter bench`, 100 calls of one key (99%
    duplicates) all in flight at once, the body served by a Python worker.
    bench's own check (bodies entered from the answers, against the keys it
    derives from the declaration in --tools-file) passes, and the body counts
    one entry."""
    ex = workers_executor
    name = fresh("book")
    entered: list[str] = []
    book = booking_tool(name, entered)
    # For bench to know the tool's kind and key argument: the declaration as
    # a tools file writes it. The executor is not given it (it learns the tool
    # from the worker); bench reads only the declaration, never calls the
    # body, and skips a tools file's nats: tools (they are built once
    # connected), hence an http: body that nothing serves.
    decl = book.declaration()
    tools_file = tmp_path / "tools.yaml"
    tools_file.write_text(
        json.dumps(
            {
                "tools": [
                    {
                        "name": name,
                        "description": decl["description"],
                        "idempotency": {"kind": "effectful", "key_arguments": ["flight"]},
                        "timeout": "10s",
                        "parameters": decl["parameters"],
                        "http": {"url": "http://127.0.0.1:9/never-called"},
                    }
                ]
            }
        )
    )
    argv = [str(ex.emitter), "-s", ex.url, "--json", "bench", "--tools-file", str(tools_file)]
    argv += ["--tool", name, "--tenant", "acme"]
    argv += ["--args", '{"flight":"PB{{key}}","request_id":"req-{{call}}"}']
    argv += ["--calls", str(STORM), "--duplicates", "0.99", "--warmup", "0"]
    argv += ["--concurrency", str(STORM)]

    async def main() -> tuple[int, bytes, bytes]:
        async with Worker.connect(book, servers=ex.url), Client.connect(ex.url) as client:
            await served(client, name)
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=clean_env(),
            )
            out, err = await proc.communicate()
            assert proc.returncode is not None
            return proc.returncode, out, err

    rc, out, err = run(main())
    assert rc == 0, (out + err).decode()
    report: dict[str, Any] = json.loads(out)
    check = report["check"]
    print(
        f"STORM go->python: {report['calls']} calls, answers {report['answers']}, bench counts "
        f"{check['bodies_entered']} body entered, the body {len(entered)} time(s) (executor: "
        f"{ex.bodies(name)}), {report['elapsed_seconds']:.2f} s, p50 "
        f"{report['latency_ms']['p50']:.1f} ms"
    )
    assert report["calls"] == report["answered"] == STORM
    assert report["distinct_keys"] == 1
    assert report["answers"] == {"completed": 1, "deduplicated": STORM - 1}
    assert check["applies"]
    assert check["ok"], check["verdict"]
    assert check["bodies_entered"] == 1
    assert check["key_mismatches"] == 0
    assert len(entered) == 1
    assert ex.bodies(name) == 1


# --- what a body's failure does ----------------------------------------------------------


class RefusedError(Exception):
    pass


def test_no_effect_frees_the_key(workers_executor: Executor) -> None:
    """A body that raises NoEffect: the call fails no_effect, the claim is
    released, and the next call with the key runs the body, even for an
    effectful tool; the one after is deduplicated."""
    ex = workers_executor
    name, run_id, f = fresh("reserve"), fresh("run"), flight()
    entered: list[str] = []

    async def reserve(flight: str, request_id: str) -> str:
        """Reserve a seat; the airline refuses the first time."""
        entered.append(request_id)
        if len(entered) == 1:
            raise NoEffect(RefusedError("the airline refused: try again later"))
        return f"reserved {flight}"

    served_tool = tool(idempotency=BOOK, name=name, timeout=10)(reserve)

    async def main() -> tuple[FailedError, CallResult, CallResult]:
        async with (
            Worker.connect(served_tool, servers=ex.url),
            Client.connect(ex.url, run_id=run_id) as client,
        ):
            await served(client, name)
            with pytest.raises(FailedError) as refused:
                await client.call("acme", name, {"flight": f, "request_id": "a"})
            second = await client.call("acme", name, {"flight": f, "request_id": "b"})
            third = await client.call("acme", name, {"flight": f, "request_id": "c"})
            return refused.value, second, third

    refused, second, third = run(main())
    print(f"NO_EFFECT: {refused}; then {second.kind.name}, {third.kind.name}; entered {entered}")
    assert refused.code is FailureCode.NO_EFFECT
    assert "the airline refused: try again later" in refused.message
    assert second.kind is RunEventKind.TOOL_COMPLETED
    assert second.outcome == f"reserved {f}"
    assert third.kind is RunEventKind.TOOL_DEDUPLICATED
    assert entered == ["a", "b"]
    assert ex.bodies(name) == 2


def test_a_failed_body_leaves_the_key_indeterminate(workers_executor: Executor) -> None:
    """A body that raises anything else: its effect may have landed, so the
    effectful call is indeterminate (body_failed), and so is the retry, which
    does not enter the body."""
    ex = workers_executor
    name, run_id, f = fresh("charge"), fresh("run"), flight()
    entered: list[str] = []

    def charge(flight: str, request_id: str) -> str:
        """Charge a card (a plain function: it runs in a thread)."""
        entered.append(request_id)
        raise ConnectionResetError("the card processor hung up after charging")

    served_tool = tool(idempotency=BOOK, name=name, timeout=10)(charge)

    async def main() -> tuple[IndeterminateOutcomeError, IndeterminateOutcomeError]:
        async with (
            Worker.connect(served_tool, servers=ex.url),
            Client.connect(ex.url, run_id=run_id) as client,
        ):
            await served(client, name)
            with pytest.raises(IndeterminateOutcomeError) as lost:
                await client.call("acme", name, {"flight": f, "request_id": "a"})
            with pytest.raises(IndeterminateOutcomeError) as again:
                await client.call("acme", name, {"flight": f, "request_id": "b"})
            return lost.value, again.value

    lost, again = run(main())
    for err in (lost, again):
        assert err.reason is IndeterminateReason.BODY_FAILED
        assert err.body_entered is True
        assert err.key == key_of(run_id, name, f)
    assert entered == ["a"]
    assert ex.bodies(name) == 1


# --- a worker that dies, a worker that is stopped ------------------------------------------


def test_a_worker_killed_mid_body(workers_executor: Executor, tmp_path: Path) -> None:
    """A worker process SIGKILLed while it holds the request: nothing ever
    replies, so the call is answered indeterminate when the tool's timeout
    (2 s) passes, and the key is never run again: a second call with the key,
    with a healthy worker serving the tool, gets the same answer, and the new
    worker's body is not entered."""
    ex = workers_executor
    name, run_id, f = fresh("hang"), fresh("run"), flight()
    entries_a, entries_b = tmp_path / "a.entries", tmp_path / "b.entries"
    a = start_worker(tmp_path, "worker-a", ex.url, name, entries_a, hold=60, timeout=2)
    b: Process | None = None

    async def main() -> tuple[IndeterminateOutcomeError, IndeterminateOutcomeError, float]:
        nonlocal b
        async with Client.connect(ex.url, run_id=run_id) as client:
            await served(client, name)
            call = asyncio.ensure_future(
                client.call("acme", name, {"flight": f, "request_id": "a"}, timeout=30)
            )
            await wait_until(lambda: len(lines(entries_a)) == 1, "worker a entered the body")
            killed = time.monotonic()
            os.killpg(a.proc.pid, signal.SIGKILL)
            with pytest.raises(IndeterminateOutcomeError) as first:
                await call
            answered_after = time.monotonic() - killed
            b = start_worker(tmp_path, "worker-b", ex.url, name, entries_b, hold=60, timeout=2)
            await served(client, name)  # worker a was forgotten long ago: b serves it
            with pytest.raises(IndeterminateOutcomeError) as again:
                await client.call("acme", name, {"flight": f, "request_id": "b"}, timeout=30)
            return first.value, again.value, answered_after

    try:
        first, again, answered_after = run(main())
    finally:
        a.stop()
        if b is not None:
            b.stop()
    assert a.proc.returncode == -signal.SIGKILL
    print(
        f"KILLED MID-BODY: answered {first.reason} {answered_after:.2f} s after the kill; "
        f"again: {again.reason}; entries: worker a {lines(entries_a)}, worker b "
        f"{lines(entries_b)}; executor: {ex.bodies(name)}"
    )
    key = key_of(run_id, name, f)
    for err in (first, again):
        assert err.reason is IndeterminateReason.TIMEOUT
        assert err.body_entered is True
        assert err.key == key
    assert first.event is not None
    assert again.event is not None
    assert first.event.call_id != again.event.call_id
    assert lines(entries_a) == ["a"]
    assert lines(entries_b) == []
    assert ex.bodies(name) == 1
    record = ex.emitter_json("inspect", "--tenant", "acme", "--key", key)
    assert record["state"] == "indeterminate"


def test_sigterm_lets_the_body_running_finish(workers_executor: Executor, tmp_path: Path) -> None:
    """SIGTERM to a worker process (toolexec.serve) while a body runs: the
    service goes at once (a call of another key then finds no worker: failed
    no_effect, nothing run), the body completes and its call is answered
    completed, and the worker exits 0."""
    ex = workers_executor
    name, run_id, f, g = fresh("slow"), fresh("run"), flight(), flight()
    entries = tmp_path / "entries"
    w = start_worker(tmp_path, "worker", ex.url, name, entries, hold=1.5, timeout=20)

    async def main() -> tuple[CallResult, BaseException, int, float]:
        async with Client.connect(ex.url, run_id=run_id) as client:
            await served(client, name)
            call = asyncio.ensure_future(
                client.call("acme", name, {"flight": f, "request_id": "a"})
            )
            await wait_until(lambda: len(lines(entries)) == 1, "the body entered")
            termed = time.monotonic()
            os.killpg(w.proc.pid, signal.SIGTERM)
            await asyncio.sleep(0.3)  # the worker drains its endpoint meanwhile
            try:
                await client.call("acme", name, {"flight": g, "request_id": "b"})
            except (FailedError, RejectedError) as e:
                other: BaseException = e
            else:
                raise AssertionError("a call reached a worker that was stopping")
            assert not call.done()
            result = await call
            rc = await asyncio.to_thread(w.proc.wait, 20)
            return result, other, rc, time.monotonic() - termed

    try:
        result, other, rc, took = run(main())
    finally:
        w.stop()
    print(
        f"SIGTERM MID-BODY: the call {result.kind.name} ({result.outcome!r}); another key "
        f"meanwhile: {other}; exit status {rc}, {took:.2f} s after the signal"
    )
    assert result.kind is RunEventKind.TOOL_COMPLETED
    assert result.outcome == f"booked {f}"
    assert rc == 0
    assert lines(entries) == ["a"]
    # No worker received the other call: the server said so at once, so the
    # executor failed it without effect (or, had it forgotten the tool by
    # then, rejected it as unknown).
    if isinstance(other, FailedError):
        assert other.code is FailureCode.NO_EFFECT
    else:
        assert isinstance(other, RejectedError)
        assert other.code is RejectionCode.UNKNOWN_TOOL
    assert "SIGTERM: stopping" in w.output()


# --- the service, as the executors see it -----------------------------------------------------


def test_the_executor_learns_the_declaration(workers_executor: Executor) -> None:
    """$SRV.INFO.toolexec-worker shows the worker's endpoint as §12 says, and
    the executor serves the tool as declared: its catalog lists the
    declaration, and calls run the body (a read_only tool: no key, every call
    enters)."""
    ex = workers_executor
    name, run_id = fresh("fare"), fresh("run")
    entered: list[ToolContext] = []

    async def lookup_fare(ctx: ToolContext, flight: str, cabins: list[str] | None = None) -> str:
        """Read the current fare.

        Args:
            flight: Flight number.
            cabins: The cabins to price; all of them by default.
        """
        entered.append(ctx)
        return f"{flight}: 142.00 GBP"

    fare = tool(idempotency=Idempotency.READ_ONLY, name=name)(lookup_fare)

    async def main() -> tuple[list[dict[str, Any]], str, ToolDeclaration, list[CallResult]]:
        async with (
            Worker.connect(fare, servers=ex.url, version="2.0.1") as worker,
            Client.connect(ex.url, run_id=run_id) as client,
        ):
            infos: list[dict[str, Any]] = []

            async def heard(msg: Msg) -> None:
                infos.append(json.loads(msg.data))

            async with await nats.connect(ex.url) as nc:
                inbox = nc.new_inbox()
                sub = await nc.subscribe(inbox, cb=heard)
                await nc.publish("$SRV.INFO.toolexec-worker", b"", reply=inbox)
                await wait_until(lambda: any(i["id"] == worker.id for i in infos), "info")
                await sub.unsubscribe()
            declared = await served(client, name)
            results = [
                await client.call("acme", name, {"flight": "BA117"}),
                await client.call("acme", name, {"flight": "BA117", "cabins": ["economy"]}),
            ]
            return infos, worker.id, declared, results

    infos, worker_id, declared, results = run(main())
    info = next(i for i in infos if i["id"] == worker_id)
    assert info["name"] == "toolexec-worker"
    assert info["version"] == "2.0.1"
    [endpoint] = info["endpoints"]
    assert endpoint["name"] == name
    assert endpoint["subject"] == f"toolexec.body.{name}"
    assert endpoint["queue_group"] == "toolexec.body"
    want = fare.declaration()
    want["timeout_ms"] = 30_000  # declared without: the executors' default, written out
    assert json.loads(endpoint["metadata"]["toolexec.declaration"]) == want
    # The executor accepted it: its catalog declares the tool as the worker does.
    assert declared.declaration() == want
    assert declared.kind is Idempotency.READ_ONLY
    assert [r.kind for r in results] == [RunEventKind.TOOL_COMPLETED] * 2
    assert results[0].outcome == "BA117: 142.00 GBP"
    assert len(entered) == 2
    # read_only: no Idempotency-Key header, so no key in the context.
    assert [c.idempotency_key for c in entered] == [None, None]
    assert entered[0].tenant == "acme"
    assert entered[0].run_id == run_id
    assert entered[0].tool == name
    assert entered[0].attempt == 1
    assert entered[0].call_id == results[0].call_id


# --- the example -----------------------------------------------------------------------------


def test_the_example(workers_executor: Executor) -> None:
    """examples/tool_idempotency.py (README.md's From Python runs it with make
    example-python): the three signals, the body entered twice for the four
    bookings."""
    example = Path(__file__).resolve().parents[2] / "examples" / "tool_idempotency.py"
    p = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(NATS_URL=workers_executor.url),
        check=False,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == [
        "lookup_fare BA117                    → TOOL_COMPLETED: 142.00 GBP",
        "book BA117                           → TOOL_COMPLETED: PNR-DCACA7",
        "retry, fresh request_id              → TOOL_DEDUPLICATED: PNR-DCACA7",
        "book BA999, answer lost              → TOOL_INDETERMINATE: reason=body_failed "
        "key=03d1cf92a62e…",
        "retry BA999                          → TOOL_INDETERMINATE: reason=body_failed "
        "key=03d1cf92a62e…",
        "book's body entered 2 times for 4 calls; seats taken: BA117=1, BA999=1",
    ]
