"""toolexec.Client where each tenant is a NATS account without JetStream
(deploy/accounts.conf, loaded into nats-server built from the module proxy at
go.mod's version): calls cross the account's service import, stored answers
are read through the executors' history service (docs/PROTOCOL.md §7), and the
client turns to it by itself. The executor here answers in binary mode
(--binary-answers), so every read path meets binary answers too: live, the
history service, and (as the executors' own user, whose account has
JetStream) a JetStream message get and an ordered consumer.

Then a bare JetStream server, for what a call meets where no executor of this
wire version runs: no stream (NoStreamError), a stream of wire version 1
(OldExecutorsError), and a stream gone for a while after the tenant's calls
were stored (tried again, as during a leader election)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import nats.js.api
import pytest

from conftest import REPO, GoPrograms
from live import (
    TOOLS_FILE,
    Downstream,
    Executor,
    Process,
    clean_env,
    free_port,
    run,
)
from toolexec import (
    CallResult,
    Client,
    IndeterminateOutcomeError,
    NoAnswerError,
    NoHistoryServiceError,
    NoStreamError,
    OldExecutorsError,
    RunEvent,
    RunEventKind,
)


@dataclass
class Accounts:
    """The server of deploy/accounts.conf, an executor on it, and the users'
    passwords."""

    url: str
    passwords: dict[str, str]
    executor: Executor
    downstream: Downstream

    def connect(self, user: str, **kw: Any) -> Any:
        return Client.connect(self.url, user=user, password=self.passwords[user], **kw)


def accounts_conf(port: int, monitor: int, store: Path) -> str:
    """deploy/accounts.conf, moved to a free port and a store of its own."""
    text = (REPO / "deploy" / "accounts.conf").read_text()
    for old, new in (
        ("\nlisten: 0.0.0.0:4222\n", f"\nlisten: 127.0.0.1:{port}\n"),
        ("\nhttp: 127.0.0.1:8222\n", f"\nhttp: 127.0.0.1:{monitor}\n"),
        ("\n  store_dir: /data\n", f'\n  store_dir: "{store}"\n'),
    ):
        assert text.count(old) == 1, f"deploy/accounts.conf no longer has {old.strip()!r}"
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def accounts(
    nats_server: Path, go_programs: GoPrograms, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Accounts]:
    work = tmp_path_factory.mktemp("accounts")
    port = free_port()
    conf = work / "accounts.conf"
    conf.write_text(accounts_conf(port, free_port(), work / "js"))
    passwords = {
        u: secrets.token_hex(12) for u in ("executor", "admin", "worker", "acme", "globex")
    }
    env = clean_env(**{f"TOOLEXEC_{u.upper()}_PASSWORD": p for u, p in passwords.items()})
    server = Process("nats-server", [str(nats_server), "-c", str(conf)], cwd=work, env=env)
    downstream = Downstream()
    ex: Process | None = None
    try:
        server.await_line(r"Server is ready")
        url = f"nats://127.0.0.1:{port}"
        tools = work / "tools.yaml"
        tools.write_text(TOOLS_FILE)
        metrics = f"127.0.0.1:{free_port()}"
        ex = Process(
            "executor",
            [
                str(go_programs.executor),
                "--server",
                url,
                "--user",
                "executor",
                "--admin-account",
                "ADMIN",
                "--binary-answers",
                "--demo",
                "--tools-file",
                str(tools),
                "--metrics-addr",
                metrics,
                "--drain-timeout",
                "2s",
                "--log-level",
                "warn",
            ],
            cwd=work,
            env=clean_env(
                TOOLEXEC_NATS_PASSWORD=passwords["executor"],
                DOWNSTREAM_URL=downstream.url,
                HOME=str(work),
            ),
        )
        ex.await_line(r"^toolexec executor ready")
        yield Accounts(
            url=url,
            passwords=passwords,
            executor=Executor(
                url=url, metrics="http://" + metrics, emitter=go_programs.emitter, process=ex
            ),
            downstream=downstream,
        )
    finally:
        downstream.release_all()
        if ex is not None:
            ex.stop()
        downstream.close()
        server.stop()


def fresh(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


async def take(events: Any, n: int) -> list[RunEvent]:
    out: list[RunEvent] = []
    async for event in events:
        out.append(event)
        if len(out) == n:
            break
    return out


def test_a_tenant_without_jetstream(accounts: Accounts, caplog: pytest.LogCaptureFixture) -> None:
    """acme calls, attaches after a timeout and watches with history, all
    through its account's imports: the stored answers come from the history
    service."""
    caplog.set_level(logging.INFO, logger="toolexec.client")
    run_id, fare_id, ticket = fresh("acme_run"), fresh("fare"), fresh("ticket")
    fl, lost_fl = (f"A{c}" + str(uuid.uuid4().int % 10_000) for c in "CD")

    async def main() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with accounts.connect("acme", run_id=run_id) as acme:
            booking = {"flight": fl, "seats": 1, "request_id": "a"}
            got["first"] = await acme.call("acme", "book", booking)
            got["retry"] = await acme.call("acme", "book", {**booking, "request_id": "b"})
            # A chosen id called again: the executor acknowledges it unrun, and
            # the stored answer is read through the history service.
            got["fare"] = await acme.call(
                "acme", "lookup_fare", {"flight": "LH400"}, call_id=fare_id
            )
            got["fare_again"] = await acme.call(
                "acme", "lookup_fare", {"flight": "LH400"}, call_id=fare_id
            )
            with pytest.raises(IndeterminateOutcomeError) as lost:
                await acme.call(
                    "acme",
                    "book",
                    {"flight": lost_fl, "seats": 1, "request_id": "c", "fail_after_effect": True},
                )
            got["lost"] = lost.value
            with pytest.raises(NoAnswerError) as late:
                await acme.call("acme", "hold", {"ticket": ticket}, timeout=0.5)
            err = late.value
            accounts.downstream.release(ticket)
            got["attached"] = await acme.attach(err.tenant, err.tool, err.run_id, err.call_id)
            # Watch with history: the run's five stored answers, then one
            # made after the watch started, heard live, each once.
            run_filter = f"toolexec.event.acme.*.*.{run_id}.*"
            async with acme.watch(run_filter, from_start=True) as events:
                stored = await take(events, 5)
                await acme.call("acme", "lookup_fare", {"flight": "UA901"})
                got["watched"] = stored + await take(events, 1)
            async with acme.watch(run_filter, since=datetime.timedelta(hours=1)) as events:
                got["since"] = await take(events, 6)
            got["tools"] = [t.name for t in await acme.tools("acme")]
            # Another tenant's calls and history are out of acme's reach.
            with pytest.raises(NoStreamError):
                await acme.call("globex", "book", booking)
            with pytest.raises(NoHistoryServiceError):
                await acme.watch("globex", from_start=True).start()
        async with accounts.connect("globex", run_id=run_id) as globex:
            got["globex"] = await globex.call("globex", "book", booking)
        return got

    got = run(main())
    first, retry = got["first"], got["retry"]
    assert first.kind is RunEventKind.TOOL_COMPLETED
    assert retry.kind is RunEventKind.TOOL_DEDUPLICATED
    assert retry.outcome == first.outcome
    assert got["fare"] == got["fare_again"]
    assert got["fare"].outcome == "EUR 489.00"
    assert got["lost"].body_entered is True
    attached: CallResult = got["attached"]
    assert attached.outcome == f"held {ticket}"
    kinds = [e.kind for e in got["watched"]]
    assert kinds == [
        RunEventKind.TOOL_COMPLETED,
        RunEventKind.TOOL_DEDUPLICATED,
        RunEventKind.TOOL_COMPLETED,
        RunEventKind.TOOL_INDETERMINATE,
        RunEventKind.TOOL_COMPLETED,
        RunEventKind.TOOL_COMPLETED,
    ]
    assert len({e.id for e in got["watched"]}) == 6
    assert [e.id for e in got["since"]] == [e.id for e in got["watched"]]
    assert got["watched"][4].outcome == f"held {ticket}"
    assert got["watched"][5].outcome == "USD 734.20"
    assert got["tools"] == ["book", "hold", "lookup_fare", "refuse", "update_profile"]
    # The same run and flight in another tenant is another key, booked anew.
    assert got["globex"].kind is RunEventKind.TOOL_COMPLETED
    assert got["globex"].key != first.key
    # The client found out by itself that the account has no JetStream.
    assert any("history service" in r.getMessage() for r in caplog.records)


def test_binary_answers_read_everywhere(accounts: Accounts) -> None:
    """The executor answers in binary mode: the answers the tenant heard live
    are the ones the executors' own user (whose account has JetStream) reads
    with a message get and an ordered consumer, and the admin's history."""
    run_id = fresh("binary_run")
    fl = "BN" + str(uuid.uuid4().int % 10_000)

    async def main() -> tuple[list[CallResult], list[CallResult], list[RunEvent], list[RunEvent]]:
        async with accounts.connect("acme", run_id=run_id) as acme:
            booking = {"flight": fl, "seats": 1, "request_id": "a"}
            heard = [
                await acme.call("acme", "book", booking),
                await acme.call("acme", "book", {**booking, "request_id": "b"}),
            ]
        async with accounts.connect("executor") as inside:
            read = [await inside.attach("acme", "book", r.run_id, r.call_id) for r in heard]
            async with inside.watch(
                f"toolexec.event.acme.*.*.{run_id}.*", from_start=True
            ) as events:
                consumed = await take(events, 2)
        async with (
            accounts.connect("admin") as admin,
            admin.watch(f"toolexec.event.*.*.*.{run_id}.*", from_start=True) as events,
        ):
            audited = await take(events, 2)
        return heard, read, consumed, audited

    heard, read, consumed, audited = run(main())
    assert read == heard
    for events in (consumed, audited):
        assert [e.kind for e in events] == [r.kind for r in heard]
        assert [e.call_id for e in events] == [r.call_id for r in heard]
        assert [e.outcome for e in events] == [r.outcome for r in heard]
        assert all(e.source.startswith("/toolexec/executor/") for e in events)
    assert consumed[0].seq is not None
    assert [e.id for e in consumed] == [e.id for e in audited]


# --- a bare JetStream server ---------------------------------------------------------


@pytest.fixture(scope="module")
def bare(nats_server: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """nats-server with JetStream and no executor ever run against it."""
    work = tmp_path_factory.mktemp("bare")
    port = free_port()
    argv = [str(nats_server), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(work / "js")]
    server = Process("nats-server", argv, cwd=work, env=clean_env())
    try:
        server.await_line(r"Server is ready")
        yield f"nats://127.0.0.1:{port}"
    finally:
        server.stop()


def test_no_stream_fails_at_once(bare: str) -> None:
    async def main() -> tuple[NoStreamError, float]:
        async with Client.connect(bare) as client:
            start = time.monotonic()
            with pytest.raises(NoStreamError) as e:
                await client.call("acme", "book", {"flight": "BA117"}, timeout=10)
            return e.value, time.monotonic() - start

    err, took = run(main())
    assert took < 1.0
    assert err.tenant == "acme"
    assert "no executor has run" in str(err)
    assert "toolexec.call.acme.>" in str(err)


def test_executors_of_wire_version_1(bare: str) -> None:
    async def main() -> OldExecutorsError:
        async with Client.connect(bare) as client:
            js = client.nc.jetstream()
            await js.add_stream(name="TOOLEXEC_CALLS", subjects=["toolexec.call.>"])
            try:
                with pytest.raises(OldExecutorsError) as e:
                    await client.call("acme", "book", {"flight": "BA117"})
                info = await js.stream_info("TOOLEXEC_CALLS")
                assert info.state.messages == 0  # nothing was stored
                return e.value
            finally:
                await js.delete_stream("TOOLEXEC_CALLS")

    err = run(main())
    assert err.subject.startswith("toolexec.call.acme.book.call_")
    assert "§11" in str(err)


def test_no_responders_after_a_stored_call_is_tried_again(bare: str) -> None:
    """Once a call of the tenant was stored, no responders is a stream
    electing a leader: the call is tried again until its timeout, and stored
    when the stream is back. A client that never stored one fails at once."""

    async def main() -> tuple[NoAnswerError, NoStreamError, float, int]:
        async with Client.connect(bare) as client, Client.connect(bare) as newcomer:
            js = client.nc.jetstream()
            config = nats.js.api.StreamConfig(
                name="TOOLEXEC_CALLS_V2",
                subjects=["toolexec.call.*.*.*"],
                retention=nats.js.api.RetentionPolicy.WORK_QUEUE,
                max_msgs_per_subject=1,
            )
            await js.add_stream(config)
            with pytest.raises(NoAnswerError):  # stored; no executor answers
                await client.call("acme", "book", {"flight": "BA117"}, timeout=0.5)
            await js.delete_stream("TOOLEXEC_CALLS_V2")
            with pytest.raises(NoStreamError) as never:
                await newcomer.call("acme", "book", {"flight": "BA117"}, timeout=3)
            start = time.monotonic()
            later = asyncio.create_task(client.call("acme", "book", {"flight": "LH400"}, timeout=3))
            await asyncio.sleep(1.0)
            assert not later.done()
            await js.add_stream(config)
            with pytest.raises(NoAnswerError) as waited:
                await later
            took = time.monotonic() - start
            stored = (await js.stream_info("TOOLEXEC_CALLS_V2")).state.messages
            await js.delete_stream("TOOLEXEC_CALLS_V2")
            return waited.value, never.value, took, stored

    waited, never, took, stored = run(main())
    assert 2.9 < took < 4.5
    assert stored == 1
    assert waited.tool == "book"
    assert never.tenant == "acme"
