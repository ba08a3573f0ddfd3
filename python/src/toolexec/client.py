"""Calling tools through the executors, over NATS: :class:`Client`.

The client speaks the wire of docs/PROTOCOL.md (version 2) with nats-py, as
the Go client does (``toolexec.Client``)::

    async with Client.connect("nats://127.0.0.1:4222") as client:
        booking = {"flight": "BA117", "seats": 1, "request_id": "a"}
        result = await client.call("acme", "book", booking)
        print(result.kind.name, result.outcome)   # TOOL_COMPLETED, or TOOL_DEDUPLICATED

A call is published as a structured CloudEvent on
``toolexec.call.<tenant>.<tool>.<call_id>`` (§4), after subscribing to its
answer (§7), and ends in a :class:`CallResult` (completed, or deduplicated:
the outcome of an earlier call with the same key, nothing ran) or in one of
the errors of :mod:`toolexec.errors`:

* :class:`~toolexec.errors.IndeterminateOutcomeError`: nobody can say whether
  the effect landed, and running the tool again will not find out;
* :class:`~toolexec.errors.FailedError`, :class:`~toolexec.errors.RejectedError`
  (also for a call refused before anything was sent: a bad token, arguments
  that are not a JSON object);
* :class:`~toolexec.errors.CallIDTakenError`: a call id that a waiting call of
  the same tenant and tool holds, one this client did not publish, at once;
* :class:`~toolexec.errors.NoAnswerError`: the timeout passed first; the call
  may still be answered, and :meth:`Client.attach` finds the answer;
* :class:`~toolexec.errors.NoStreamError`,
  :class:`~toolexec.errors.OldExecutorsError`,
  :class:`~toolexec.errors.JetStreamError`: nothing was stored.

Stored answers are read from ``TOOLEXEC_EVENTS`` with one JetStream message
get, or, where the account has no JetStream (a tenant in an account of its
own), through the executors' history service (§7): the client turns to it by
itself the first time JetStream answers that the account has none.

Every coroutine here may be cancelled: it leaves no subscription behind. A
cancelled call may still have been published, and be answered.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import json
import logging
import os
import time
from collections.abc import Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias

import nats
import nats.errors
import nats.js.api
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from . import _connect, _wire
from .errors import (
    CallIDTakenError,
    CatalogError,
    FailedError,
    HistoryError,
    IndeterminateOutcomeError,
    JetStreamError,
    MalformedAnswerError,
    NoAnswerError,
    NoCatalogServiceError,
    NoHistoryServiceError,
    NoStreamError,
    OldExecutorsError,
    RejectedError,
)
from .events import RunEvent, RunEventKind, coerce
from .tools import Idempotency

__all__ = [
    "DEFAULT_SOURCE",
    "DEFAULT_TIMEOUT",
    "CallResult",
    "Client",
    "HistoryPath",
    "ToolDeclaration",
    "Watch",
]

_log = logging.getLogger("toolexec.client")

#: The CloudEvents source of the calls of a client that names none.
DEFAULT_SOURCE: Final = "/toolexec/client/python"
#: How long a call or attach waits for its answer by default, in seconds.
DEFAULT_TIMEOUT: Final = 30.0

#: How the client reads stored events: ``"auto"`` (JetStream, and the history
#: service from the first time JetStream says the account has none),
#: ``"jetstream"`` only, or ``"service"`` only.
HistoryPath: TypeAlias = Literal["auto", "jetstream", "service"]

# How long one try of a call's publication waits for its PubAck, and the
# longest pause between tries (as the Go client).
_PUBLISH_TRY: Final = 5.0
_MAX_PUBLISH_PAUSE: Final = 0.5
# Looking for a stored answer: each look is bounded, and the next one comes
# after a pause that doubles from the first to the last.
_LOOK_TIMEOUT: Final = 5.0
_LOOK_FIRST_PAUSE: Final = 0.1
_LOOK_MAX_PAUSE: Final = 5.0
# A request to the history or catalog service.
_SERVICE_TIMEOUT: Final = 10.0
# How long a call the stream refused as waiting is looked for among the stored
# answers before it is taken for one that waits indeed (the Go client's
# pendingGrace).
_PENDING_GRACE: Final = 0.5
# How long the client remembers an id it chose and published, to tell its
# own call waiting in the stream from another publisher's.
_SENT_WINDOW: Final = 120.0
# How often a waiting call looks at whether its connection was re-made.
_RECONNECT_TICK: Final = 0.25
# A watch through the history service: what its subscription may hold while
# the reader is behind, and how many delivered ids it remembers.
_WATCH_PENDING_MSGS: Final = 1 << 20
_WATCH_PENDING_BYTES: Final = 256 << 20
_WATCH_DEDUPE_WINDOW: Final = 4096


@dataclass(frozen=True, kw_only=True, slots=True)
class CallResult:
    """The answer to a call that has an outcome.

    Attributes:
        kind: :attr:`RunEventKind.TOOL_COMPLETED` (the tool ran) or
            :attr:`RunEventKind.TOOL_DEDUPLICATED` (an earlier call with the
            same key has this outcome; nothing ran).
        outcome: The tool's result, as a string.
        key: The idempotency key (64 hex digits): the same for every call of
            the same effect; None for a tool without an idempotency policy.
        tenant: The call's tenant.
        tool: The tool called.
        run_id: The call's run.
        call_id: The call's id.
        time: When the answer was made, when it says.
    """

    kind: RunEventKind
    outcome: str
    key: str | None
    tenant: str
    tool: str
    run_id: str
    call_id: str
    time: datetime.datetime | None

    @property
    def deduplicated(self) -> bool:
        """Whether the outcome is an earlier call's (nothing ran for this one)."""
        return self.kind is RunEventKind.TOOL_DEDUPLICATED


@dataclass(frozen=True, kw_only=True)
class ToolDeclaration:
    """A tool the executors serve, as their catalog declares it (§8).

    Attributes:
        name: The tool's name.
        parameters: The JSON Schema of its arguments object.
        description: What it does ("" for nothing said).
        kind: Its :class:`~toolexec.Idempotency` (a kind this version does
            not know stays a string); None for a tool without a policy.
        key_arguments: The arguments that identify its effect: None for
            every argument, ``()`` for none.
        check_arguments: Arguments a duplicate must not change.
        timeout: The bound on one attempt of its body, in seconds; None for
            none of its own.
        unavailable: The tool is listed but not run now: the server its body
            calls cannot be reached, and its calls are rejected
            ``upstream_unavailable`` (nothing ran; retrying later is safe).
    """

    name: str
    parameters: dict[str, Any] = field(hash=False)
    description: str = ""
    kind: Idempotency | str | None = None
    key_arguments: tuple[str, ...] | None = None
    check_arguments: tuple[str, ...] = ()
    timeout: float | None = None
    unavailable: bool = False

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> ToolDeclaration:
        """A declaration as a catalog reply carries it."""
        name = d.get("name")
        params = d.get("parameters", {"type": "object"})
        if not _wire.valid_token(name) or not isinstance(params, dict):
            raise MalformedAnswerError(f"a catalog declaration is not one: {dict(d)!r:.200}")
        assert isinstance(name, str)
        kind = d.get("kind")
        keys = d.get("key_arguments")
        timeout_ms = d.get("timeout_ms")
        description = d.get("description")
        return cls(
            name=name,
            parameters=params,
            description=description if isinstance(description, str) else "",
            kind=coerce(Idempotency, kind) if isinstance(kind, str) and kind else None,
            key_arguments=tuple(_wire.strings(keys)) if keys is not None else None,
            check_arguments=tuple(_wire.strings(d.get("check_arguments"))),
            timeout=timeout_ms / 1000 if isinstance(timeout_ms, int) and timeout_ms > 0 else None,
            unavailable=d.get("unavailable") is True,
        )

    def declaration(self) -> dict[str, Any]:
        """The declaration as the catalog holds it: the JSON object a
        Python tool's :meth:`toolexec.Tool.declaration` gives too."""
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        d["parameters"] = json.loads(json.dumps(self.parameters))
        if self.kind is not None:
            d["kind"] = str(self.kind)
            if self.key_arguments is not None:
                d["key_arguments"] = list(self.key_arguments)
            if self.check_arguments:
                d["check_arguments"] = list(self.check_arguments)
        if self.timeout is not None:
            d["timeout_ms"] = round(self.timeout * 1000)
        if self.unavailable:
            d["unavailable"] = True
        return d


class _SentIDs:
    """The call ids a client chose and published within a window, counted
    per tenant, tool and id (a fresh id is nobody else's: not kept)."""

    def __init__(self, window: float) -> None:
        self._window = window
        self._ids: dict[tuple[str, str, str], tuple[float, int]] = {}
        self._sweep_at = 0.0

    def add(self, key: tuple[str, str, str]) -> None:
        now = time.monotonic()
        last, n = self._ids.get(key, (0.0, 0))
        if now - last > self._window:
            n = 0
        self._ids[key] = (now, n + 1)
        if now >= self._sweep_at:
            for k, (t, _) in list(self._ids.items()):
                if now - t > self._window:
                    del self._ids[k]
            self._sweep_at = now + self._window

    def undo(self, key: tuple[str, str, str]) -> None:
        entry = self._ids.get(key)
        if entry is None:
            return
        if entry[1] <= 1:
            del self._ids[key]
        else:
            self._ids[key] = (entry[0], entry[1] - 1)

    def count(self, key: tuple[str, str, str]) -> int:
        last, n = self._ids.get(key, (0.0, 0))
        return n if time.monotonic() - last <= self._window else 0


class _NoJetStreamError(Exception):
    """The JetStream API answered that the account has none (or nobody
    answered it)."""

    def __init__(self, err: JetStreamError) -> None:
        super().__init__(str(err))
        self.err = err


@dataclass(frozen=True, slots=True)
class _Published:
    pending: bool = False  # refused: a call of the subject waits in the stream
    duplicate: bool = False  # an earlier try, whose PubAck was lost, stored it


class Client:
    """A caller of the executors' tools over NATS.

    Args:
        nc: A connected nats-py client; the client uses it and leaves it open
            (see :meth:`connect` for one the client makes and closes).
        run_id: The run of the calls that name none; default a fresh
            ``run_`` id drawn now. The run is part of the idempotency key.
        source: The CloudEvents source of the calls: who calls, such as
            ``/agents/trip-planner``.
        history: How stored events are read (see :data:`HistoryPath`).

    Raises:
        ValueError: A run id that is not a token, or a source that is not a
            URI reference.

    It may be used by many tasks at once, on one event loop.
    """

    def __init__(
        self,
        nc: NatsClient,
        *,
        run_id: str | None = None,
        source: str = DEFAULT_SOURCE,
        history: HistoryPath = "auto",
    ) -> None:
        if run_id is None:
            run_id = _wire.new_id("run_")
        elif not _wire.valid_token(run_id):
            raise ValueError(f"run_id {run_id!r} is not a token of [A-Za-z0-9_-]{{1,128}}")
        if not isinstance(source, str) or not source or any(c <= " " for c in source):
            raise ValueError(f"source {source!r} is not a URI reference")
        if history not in ("auto", "jetstream", "service"):
            raise ValueError(f"history {history!r}: want 'auto', 'jetstream' or 'service'")
        self._nc = nc
        self._run_id = run_id
        self._source = source
        self._history: HistoryPath = history
        self._no_jetstream = False
        self._sent = _SentIDs(_SENT_WINDOW)
        self._reached: set[str] = set()
        self._owned = False

    # --- the connection ---------------------------------------------------------

    @classmethod
    def connect(
        cls,
        servers: str | Sequence[str] | None = None,
        *,
        creds: str | os.PathLike[str] | None = None,
        nkey: str | os.PathLike[str] | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        inbox_prefix: str | None = None,
        name: str | None = None,
        run_id: str | None = None,
        source: str = DEFAULT_SOURCE,
        history: HistoryPath = "auto",
        **options: Any,
    ) -> _Connecting:
        """Connects to NATS with the options the emitter takes, and returns
        a client that closes the connection when it is closed. Await it, or
        use it as an async context manager::

            client = await Client.connect("nats://host:4222", user="acme", password=pw)
            async with Client.connect(creds="acme.creds") as client: ...

        Args:
            servers: The server URL(s): a list, or one string of URLs
                separated by commas. Default ``$NATS_URL``, else
                ``nats://127.0.0.1:4222``.
            creds: A credentials file (.creds; needs nats-py's nkeys extra).
            nkey: A user nkey seed file (needs the nkeys extra too).
            user: A user name; without ``password``, a token, as the nats CLI
                reads it.
            password: The user's password.
            token: An authentication token.
            tls_cert: A TLS client certificate (PEM), with ``tls_key``.
            tls_key: Its key (PEM).
            tls_ca: Certificate authorities to trust (PEM).
            inbox_prefix: A prefix of reply subjects instead of ``_INBOX``.
            name: The connection's name, as the server's monitoring shows it.
            run_id: See :class:`Client`.
            source: See :class:`Client`.
            history: See :class:`Client`.
            options: Any other option of :func:`nats.connect`.
        """
        opts = _connect.nats_options(
            servers,
            creds=creds,
            nkey=nkey,
            user=user,
            password=password,
            token=token,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
            inbox_prefix=inbox_prefix,
            name=name,
            options=options,
        )
        return _Connecting(opts, lambda nc: cls(nc, run_id=run_id, source=source, history=history))

    async def close(self) -> None:
        """Closes the connection if the client made it (:meth:`connect`);
        a connection given to the client is left open."""
        if self._owned and not self._nc.is_closed:
            await self._nc.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def nc(self) -> NatsClient:
        """The NATS connection."""
        return self._nc

    @property
    def run_id(self) -> str:
        """The run of the calls that name none."""
        return self._run_id

    @property
    def source(self) -> str:
        """The CloudEvents source of the calls."""
        return self._source

    # --- calls --------------------------------------------------------------------

    async def call(
        self,
        tenant: str,
        tool: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> CallResult:
        """Calls tool for tenant with arguments, and waits for the answer.

        Args:
            tenant: The tenant (a token: ``[A-Za-z0-9_-]{1,128}``).
            tool: The tool's name.
            arguments: The JSON object of the tool's arguments: a mapping
                (str, int, float, Decimal, bool, None, lists and mappings
                inside), or its JSON text (str or UTF-8 bytes), sent byte for
                byte; None is ``{}``.
            run_id: The call's run; default the client's (:attr:`run_id`).
                Within a run, calls with the same key arguments are one effect.
            call_id: The call's id; default a fresh one (``call_`` and 32 hex
                digits). A tenant, tool and call id name one call: the id of a
                call answered before gets that call's answer, and nothing runs
                again. The call is then marked a repeat (§4).
            timeout: How long to wait for the answer, in seconds; None waits
                for ever.
            traceparent: A W3C trace context to continue (the executor's spans
                become children of it); tracestate goes with it.
            tracestate: The trace's vendor state.

        Returns:
            The :class:`CallResult` of a completed or deduplicated answer.

        Raises:
            IndeterminateOutcomeError: Nobody can say whether the effect
                landed; retrying will not run the tool again.
            FailedError: The tool failed; its effect did not land.
            RejectedError: The call was refused before anything happened, by
                an executor, or by the client before sending (a bad token,
                arguments that are not a JSON object).
            CallIDTakenError: A call of this tenant, tool and call id, which
                this client did not publish, waits to be answered: nothing
                was stored. Use a fresh id (or :meth:`attach`, if it was yours).
            NoAnswerError: The timeout passed first: the call may still be
                answered (:meth:`attach` finds the answer).
            NoStreamError: No stream takes the tenant's calls.
            OldExecutorsError: The executors speak wire version 1.
            JetStreamError: JetStream refused to store the call otherwise.
            MalformedAnswerError: What came on the answer subject is not an
                answer.
            ValueError: A traceparent or tracestate that is not W3C's.
        """
        run = self._run_id if run_id is None else run_id
        chosen = call_id is not None
        cid = call_id if call_id is not None else _wire.new_id("call_")
        _wire.check_tokens(tenant, tool, run, cid)
        _wire.check_trace(traceparent, tracestate)
        args = _wire.encode_arguments(arguments, tool)
        payload = _wire.call_event(
            tenant=tenant,
            tool=tool,
            run_id=run,
            call_id=cid,
            source=self._source,
            arguments=args,
            time=datetime.datetime.now(datetime.UTC),
            traceparent=traceparent,
            tracestate=tracestate,
        )
        headers = _wire.call_headers(repeat=chosen, traceparent=traceparent)
        sent = (tenant, tool, cid)
        if chosen:
            self._sent.add(sent)
        try:
            event = await self._within(
                timeout,
                NoAnswerError(tenant=tenant, tool=tool, run_id=run, call_id=cid),
                self._call(
                    tenant=tenant,
                    tool=tool,
                    call_id=cid,
                    payload=payload,
                    headers=headers,
                    sent=sent,
                ),
            )
        except CallIDTakenError:
            if chosen:
                self._sent.undo(sent)
            raise
        return _result(event)

    async def _call(
        self,
        *,
        tenant: str,
        tool: str,
        call_id: str,
        payload: bytes,
        headers: dict[str, str],
        sent: tuple[str, str, str],
    ) -> RunEvent:
        # Any run: a tenant, tool and call id name the call, and one published
        # before under another run is answered with its first answer.
        answer_filter = _wire.answer_filter(tenant, tool, "*", call_id)
        waiter = _Waiter(self, tenant, answer_filter)
        await waiter.subscribe()
        try:
            subject = _wire.call_subject(tenant, tool, call_id)
            published = await self._publish(subject, payload, headers, tenant)
            if published.pending:
                # The call that holds the subject may have been answered a
                # moment ago, its acknowledgement not yet in: then its answer
                # is stored, or about to be.
                stored = await self._answered_just_now(tenant, answer_filter, call_id)
                if stored is not None:
                    return stored
                if self._sent.count(sent) < 2:
                    raise CallIDTakenError(tenant=tenant, tool=tool, call_id=call_id)
            if published.pending or published.duplicate or _wire.REPEAT_HEADER in headers:
                # Published before, perhaps answered before the subscription
                # existed (and a repeat is not answered again): look too.
                waiter.look(at_once=True)
            return await waiter.wait(watch_connection=True)
        finally:
            await waiter.close()

    async def _publish(
        self, subject: str, payload: bytes, headers: dict[str, str], tenant: str
    ) -> _Published:
        """Stores the call in TOOLEXEC_CALLS_V2. A try whose PubAck does not
        come is made again, marked a repeat; no responders is tried again once
        the tenant's calls were stored before (a leader election), else it
        fails at once. The caller's timeout bounds it all."""
        attempt = 0
        while True:
            attempt += 1
            if attempt == 2:
                headers[_wire.REPEAT_HEADER] = "true"
            try:
                msg = await self._nc.request(
                    subject, payload, timeout=_PUBLISH_TRY, headers=dict(headers)
                )
            except nats.errors.NoRespondersError:
                if tenant not in self._reached:
                    raise NoStreamError(tenant=tenant, subject=subject) from None
                _log.debug("no responders for %s: the calls stream may be electing", subject)
            except nats.errors.TimeoutError:
                _log.debug("no PubAck for %s within %ss: trying again", subject, _PUBLISH_TRY)
            else:
                reply = _wire.load_reply(msg.data, "PubAck")
                err = _wire.api_error(reply)
                if err is None:
                    self._reached.add(tenant)
                    return _Published()
                code, err_code, desc = err
                if err_code == _wire.ERR_STORE_FAILED and "per subject" in desc:
                    if attempt > 1:  # an earlier try stored it
                        self._reached.add(tenant)
                        return _Published(duplicate=True)
                    return _Published(pending=True)
                if err_code == _wire.ERR_STREAM_NOT_MATCH:
                    raise OldExecutorsError(subject=subject, description=desc)
                raise JetStreamError(
                    code=code, err_code=err_code, description=desc, subject=subject
                )
            await asyncio.sleep(min(0.05 * 2 ** (attempt - 1), _MAX_PUBLISH_PAUSE))

    async def attach(
        self,
        tenant: str,
        tool: str,
        run_id: str,
        call_id: str,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> CallResult:
        """Waits for the answer to a call published earlier, by this client
        or another (after a :class:`~toolexec.errors.NoAnswerError`, or a
        restart): the stored answer, else the one heard as it is published.
        Its returns and errors are :meth:`call`'s; a
        :class:`~toolexec.errors.NoAnswerError` again when the timeout passes.

        Raises, besides: ValueError for a tenant, tool, run or call id that
        is not a token; NoHistoryServiceError, HistoryError or JetStreamError
        when the stored answer cannot be read.
        """
        for what, v in (
            ("tenant", tenant),
            ("tool", tool),
            ("run_id", run_id),
            ("call_id", call_id),
        ):
            if not _wire.valid_token(v):
                raise ValueError(f"{what} {v!r} is not a token of [A-Za-z0-9_-]{{1,128}}")
        event = await self._within(
            timeout,
            NoAnswerError(tenant=tenant, tool=tool, run_id=run_id, call_id=call_id),
            self._attach(tenant, _wire.answer_filter(tenant, tool, run_id, call_id)),
        )
        return _result(event)

    async def _attach(self, tenant: str, answer_filter: str) -> RunEvent:
        waiter = _Waiter(self, tenant, answer_filter)
        await waiter.subscribe()
        try:
            try:
                stored = await self._find_stored(tenant, answer_filter)
            except nats.errors.TimeoutError:
                stored = None  # the look went unanswered: keep looking, and listening
            except Exception:
                heard = waiter.heard()
                if heard is not None:
                    return heard
                raise
            if stored is not None:
                return stored
            waiter.look(at_once=False)
            return await waiter.wait(watch_connection=False)
        finally:
            await waiter.close()

    async def _within(
        self,
        timeout: float | None,
        no_answer: NoAnswerError,
        work: Coroutine[Any, Any, RunEvent],
    ) -> RunEvent:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        cm = asyncio.timeout_at(deadline)
        try:
            async with cm:
                return await work
        except TimeoutError:
            if cm.expired():
                raise no_answer from None
            raise

    # --- stored events --------------------------------------------------------------

    def _via_service(self) -> bool:
        if self._history == "auto":
            return self._no_jetstream
        return self._history == "service"

    def _fall_back(self, e: _NoJetStreamError) -> None:
        if self._history != "auto":
            raise e.err
        if not self._no_jetstream:
            self._no_jetstream = True
            _log.info(
                "no JetStream for this connection's account: reading stored events through "
                "the history service (%s)",
                e.err.description,
            )

    async def _answered_just_now(
        self, tenant: str, subject_filter: str, call_id: str
    ) -> RunEvent | None:
        """Looks for the answer stored under subject_filter a few times within
        _PENDING_GRACE: a call leaves the stream when acknowledged, a moment
        after its answer is published, and the answer is stored a moment
        after a subscriber heard it."""
        deadline = asyncio.get_running_loop().time() + _PENDING_GRACE
        pause = 0.025
        while True:
            try:
                stored = await self._find_stored(tenant, subject_filter)
            except Exception as e:  # a look that fails changes nothing here
                _log.debug("looking for the stored answer of %s failed: %s", call_id, e)
                stored = None
            if stored is not None and stored.kind.is_answer:
                return stored
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return None
            await asyncio.sleep(min(pause, left))
            pause *= 2

    async def _find_stored(self, tenant: str, subject_filter: str) -> RunEvent | None:
        """The first event stored under subject_filter (one call's answer),
        or None when there is none yet."""
        if not self._via_service():
            try:
                return await self._get_first(subject_filter)
            except _NoJetStreamError as e:
                self._fall_back(e)
        reply = await self._history_page(tenant, {"filter": subject_filter, "limit": 1})
        events = reply.get("events")
        if not isinstance(events, list) or not events:
            return None
        first = events[0]
        if not isinstance(first, dict):
            raise MalformedAnswerError("a history event is not a JSON object")
        return _wire.history_event(first)

    async def _get_first(self, subject_filter: str) -> RunEvent | None:
        subject = _wire.MSG_GET_SUBJECT
        request = json.dumps({"seq": 1, "next_by_subj": subject_filter}).encode()
        try:
            msg = await self._nc.request(subject, request, timeout=_LOOK_TIMEOUT)
        except nats.errors.NoRespondersError:
            raise _NoJetStreamError(
                JetStreamError(code=503, err_code=0, description="no responders", subject=subject)
            ) from None
        reply = _wire.load_reply(msg.data, "JetStream")
        err = _wire.api_error(reply)
        if err is not None:
            code, err_code, desc = err
            if err_code == _wire.ERR_NO_MESSAGE:
                return None
            js_err = JetStreamError(code=code, err_code=err_code, description=desc, subject=subject)
            if err_code in (
                _wire.ERR_JETSTREAM_NOT_ENABLED_FOR_ACCOUNT,
                _wire.ERR_JETSTREAM_NOT_ENABLED,
            ):
                raise _NoJetStreamError(js_err)
            raise js_err
        return _wire.stored_message(reply)

    async def _history_page(self, tenant: str | None, request: Mapping[str, Any]) -> dict[str, Any]:
        """A page of stored events from the history service: the tenant's
        ``toolexec.history.<tenant>``, and when nothing answers there (or for
        every tenant's events, tenant None) the operators'
        ``toolexec.admin.history``."""
        data = json.dumps(request).encode()
        subjects = (
            (_wire.history_subject(tenant), _wire.ADMIN_HISTORY_SUBJECT)
            if tenant is not None
            else (_wire.ADMIN_HISTORY_SUBJECT,)
        )
        for subject in subjects:
            try:
                msg = await self._nc.request(subject, data, timeout=_SERVICE_TIMEOUT)
            except nats.errors.NoRespondersError:
                continue
            reply = _wire.load_reply(msg.data, "history")
            err = reply.get("error")
            if isinstance(err, dict):
                raise HistoryError(
                    code=str(err.get("code", "")), message=str(err.get("message", ""))
                )
            return reply
        raise NoHistoryServiceError(subjects=subjects)

    # --- watching ---------------------------------------------------------------------

    def watch(
        self,
        target: str,
        *,
        from_start: bool = False,
        since: datetime.datetime | datetime.timedelta | None = None,
    ) -> Watch:
        """The answers and audit events of a tenant, or of a subject filter,
        as a :class:`Watch`: an async iterator of :class:`RunEvent`, whose
        ``kind`` is a :class:`RunEventKind`::

            async with client.watch("acme") as events:   # the watch starts here
                async for event in events:
                    if event.kind is RunEventKind.TOOL_INDETERMINATE: ...

        Args:
            target: A tenant (its events: ``toolexec.event.<tenant>.>``), or a
                subject filter within ``toolexec.event.``, such as
                ``toolexec.event.*.indeterminate.>`` for an auditor (a tenant
                without JetStream may only name itself), or ``""`` for every
                event.
            from_start: Deliver every stored event that matches first.
            since: Deliver the events stored from this time on first (an
                aware datetime, or a timedelta back from now).

        By default it delivers the events stored after it starts: when used
        with ``async with``, or :meth:`Watch.start`, or at the first
        iteration. Through JetStream (an ordered consumer) events come in
        stream order with no gaps; through the history service (an account
        without JetStream) the stored ones come in order, then the live ones
        as a plain subscription hears them, which misses what is published
        while the connection is down.

        Raises:
            ValueError: A target that is neither a tenant nor a filter within
                ``toolexec.event.``; from_start and since both given; a naive
                datetime.
        """
        if target == "":
            subject_filter = _wire.EVENT_PREFIX + ">"
        elif _wire.valid_token(target):
            subject_filter = f"{_wire.EVENT_PREFIX}{target}.>"
        else:
            subject_filter = target
            fault = _wire.filter_fault(target)
            if not target.startswith(_wire.EVENT_PREFIX) or len(target) == len(_wire.EVENT_PREFIX):
                fault = f"is neither a tenant nor a filter within {_wire.EVENT_PREFIX}"
            if fault is not None:
                raise ValueError(f"watch: {target!r} {fault}")
            tenant = _wire.filter_tenant(target)
            if tenant is not None and not _wire.valid_token(tenant):
                raise ValueError(f"watch: {target!r}: its tenant token is not a valid tenant")
        if from_start and since is not None:
            raise ValueError("watch: give from_start or since, not both")
        start: datetime.datetime | None = None
        if isinstance(since, datetime.timedelta):
            start = datetime.datetime.now(datetime.UTC) - since
        elif since is not None:
            if since.tzinfo is None:
                raise ValueError("watch: since is a naive datetime: give its timezone")
            start = since
        return Watch(self, subject_filter, from_start=from_start, since=start)

    # --- the catalog ----------------------------------------------------------------

    async def tools(
        self, tenant: str, *, timeout: float = _SERVICE_TIMEOUT
    ) -> list[ToolDeclaration]:
        """The tools the executors serve, sorted by name, as their catalog
        declares them on ``toolexec.tools.<tenant>`` (§8): what an agent may
        call, and what repeating each call does.

        Raises:
            ValueError: A tenant that is not a token.
            NoCatalogServiceError: No executor answers.
            CatalogError: The service refused the request.
            nats.errors.TimeoutError: No reply within the timeout.
        """
        if not _wire.valid_token(tenant):
            raise ValueError(f"tenant {tenant!r} is not a token of [A-Za-z0-9_-]{{1,128}}")
        subject = _wire.catalog_subject(tenant)
        out: list[ToolDeclaration] = []
        after = ""
        while True:
            request = json.dumps({"after": after} if after else {}).encode()
            try:
                msg = await self._nc.request(subject, request, timeout=timeout)
            except nats.errors.NoRespondersError:
                raise NoCatalogServiceError(subject=subject) from None
            reply = _wire.load_reply(msg.data, "catalog")
            err = reply.get("error")
            if isinstance(err, dict):
                raise CatalogError(
                    code=str(err.get("code", "")), message=str(err.get("message", ""))
                )
            page = reply.get("tools")
            if not isinstance(page, list):
                raise MalformedAnswerError("the catalog reply has no tools")
            for d in page:
                if not isinstance(d, dict):
                    raise MalformedAnswerError("a catalog declaration is not a JSON object")
                decl = ToolDeclaration.from_wire(d)
                if (after and decl.name <= after) or (out and decl.name <= out[-1].name):
                    raise MalformedAnswerError(f"the catalog is out of order at {decl.name!r}")
                out.append(decl)
            if not reply.get("more") or not page:
                return out
            after = out[-1].name


class _Connecting:
    """What :meth:`Client.connect` returns: await it, or enter it."""

    def __init__(self, options: dict[str, Any], make: Any) -> None:
        self._options = options
        self._make = make
        self._client: Client | None = None

    async def _open(self) -> Client:
        nc = await nats.connect(**self._options)
        client: Client = self._make(nc)
        client._owned = True
        return client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._open().__await__()

    async def __aenter__(self) -> Client:
        self._client = await self._open()
        return self._client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._client is not None:
            await self._client.close()


class _Waiter:
    """Waits for one call's answer: heard on its subject, or found stored."""

    def __init__(self, client: Client, tenant: str, subject_filter: str) -> None:
        self._client = client
        self._tenant = tenant
        self._filter = subject_filter
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._sub: Subscription | None = None
        self._looking: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def subscribe(self) -> None:
        async def heard(msg: Msg) -> None:
            self._queue.put_nowait(("live", msg))

        self._sub = await self._client.nc.subscribe(self._filter, cb=heard)

    def heard(self) -> RunEvent | None:
        """An answer heard already, without waiting."""
        while not self._queue.empty():
            tag, item = self._queue.get_nowait()
            if tag == "live":
                event = _decode_live(item)
                if event.kind.is_answer:
                    return event
        return None

    def look(self, *, at_once: bool) -> None:
        """Starts looking for the stored answer until it is found, unless a
        look is under way."""
        if self._looking is None or self._looking.done():
            self._looking = asyncio.create_task(self._look(at_once))
            self._tasks.append(self._looking)

    async def _look(self, at_once: bool) -> None:
        pause = _LOOK_FIRST_PAUSE
        if not at_once:
            await asyncio.sleep(pause)
        while True:
            try:
                event = await self._client._find_stored(self._tenant, self._filter)
            except MalformedAnswerError as e:
                self._queue.put_nowait(("error", e))
                return
            except (Exception, nats.errors.TimeoutError) as e:
                # A look that fails (no executor answers the history service
                # yet, a request lost) is made again.
                _log.debug("looking for a stored answer under %s failed: %s", self._filter, e)
            else:
                if event is not None and event.kind.is_answer:
                    self._queue.put_nowait(("stored", event))
                    return
            await asyncio.sleep(pause)
            pause = min(2 * pause, _LOOK_MAX_PAUSE)

    async def _watch_connection(self) -> None:
        # An answer published while the connection was down was not heard:
        # when it is made again, look for the stored one.
        stats = self._client.nc.stats
        seen = stats["reconnects"]
        while True:
            await asyncio.sleep(_RECONNECT_TICK)
            if stats["reconnects"] != seen:
                seen = stats["reconnects"]
                self._queue.put_nowait(("reconnected", None))

    async def wait(self, *, watch_connection: bool) -> RunEvent:
        if watch_connection:
            self._tasks.append(asyncio.create_task(self._watch_connection()))
        while True:
            tag, item = await self._queue.get()
            if tag == "live":
                event = _decode_live(item)
                if event.kind.is_answer:  # a resolution is no answer: wait on
                    return event
            elif tag == "stored":
                stored: RunEvent = item
                return stored
            elif tag == "error":
                raise item
            elif tag == "reconnected":
                self.look(at_once=True)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._sub is not None:
            sub, self._sub = self._sub, None
            try:
                await sub.unsubscribe()
            except nats.errors.Error as e:  # the connection is closed: nothing to undo
                _log.debug("unsubscribing from %s: %s", self._filter, e)


def _decode_live(msg: Msg) -> RunEvent:
    return _wire.decode_answer(_wire.single_valued(msg.headers), msg.data, subject=msg.subject)


def _result(event: RunEvent) -> CallResult:
    """A call's answer as what call() and attach() return or raise."""
    kind = event.kind
    if kind.is_success:
        # decode_answer holds a success to its tool, run, call and outcome.
        assert event.outcome is not None
        assert event.tool
        assert event.run_id
        assert event.call_id
        return CallResult(
            kind=kind,
            outcome=event.outcome,
            key=event.key,
            tenant=event.tenant,
            tool=event.tool,
            run_id=event.run_id,
            call_id=event.call_id,
            time=event.time,
        )
    if kind is RunEventKind.TOOL_INDETERMINATE:
        raise IndeterminateOutcomeError(
            tool=event.tool or "",
            key=event.key,
            reason=event.reason or "",
            body_entered=bool(event.body_entered),
            detail=event.error,
            event=event,
        )
    if kind is RunEventKind.TOOL_FAILED:
        raise FailedError(
            tool=event.tool or "", code=event.code or "", message=event.error or "", event=event
        )
    if kind is RunEventKind.TOOL_REJECTED:
        raise RejectedError(
            tool=event.tool,
            code=event.code or "",
            message=event.error or "",
            field=event.field,
            event=event,
        )
    raise MalformedAnswerError(f"a {kind.wire_kind} event answers no call", subject=event.subject)


class Watch:
    """The events :meth:`Client.watch` delivers: an async iterator of
    :class:`RunEvent`, and an async context manager that starts it on entry
    and stops it on exit. Events that are not toolexec answers are logged and
    skipped. Close it (:meth:`aclose`, or leave the ``async with``) to let go
    of its subscription."""

    def __init__(
        self,
        client: Client,
        subject_filter: str,
        *,
        from_start: bool,
        since: datetime.datetime | None,
    ) -> None:
        self._client = client
        self._filter = subject_filter
        self._from_start = from_start
        self._since = since
        self._started = False
        self._closed = False
        self._sub: Any = None  # a JetStream push subscription, or a plain one
        self._via_service = False
        # Through the history service: the page being delivered, where the
        # history ends, and the ids delivered lately.
        self._replay: collections.deque[dict[str, Any]] = collections.deque()
        self._more = False
        self._last_seq = 0
        self._until = 0
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()

    @property
    def filter(self) -> str:
        """The subject filter watched."""
        return self._filter

    async def start(self) -> Watch:
        """Starts the watch (a second call does nothing): events stored from
        now on, or from the start asked for, will be delivered.

        Raises:
            NoHistoryServiceError, HistoryError: Without JetStream, when the
                first page of history cannot be had.
            nats.js.errors.Error: When JetStream refuses the consumer.
        """
        if self._closed:
            raise RuntimeError("the watch is closed")
        if self._started:
            return self
        client = self._client
        if not client._via_service():
            try:
                await self._start_jetstream()
            except _NoJetStreamError as e:
                client._fall_back(e)
            else:
                self._started = True
                return self
        await self._start_service()
        self._started = True
        return self

    async def _start_jetstream(self) -> None:
        api = nats.js.api
        config = api.ConsumerConfig(deliver_policy=api.DeliverPolicy.NEW)
        if self._from_start:
            config.deliver_policy = api.DeliverPolicy.ALL
        elif self._since is not None:
            config.deliver_policy = api.DeliverPolicy.BY_START_TIME
            config.opt_start_time = self._since
        try:
            self._sub = await self._client.nc.jetstream().subscribe(
                self._filter,
                stream=_wire.EVENT_STREAM,
                ordered_consumer=True,
                config=config,
            )
        except nats.js.errors.APIError as e:
            no_responders = isinstance(e, nats.js.errors.ServiceUnavailableError) and not e.err_code
            if no_responders or e.err_code in (
                _wire.ERR_JETSTREAM_NOT_ENABLED_FOR_ACCOUNT,
                _wire.ERR_JETSTREAM_NOT_ENABLED,
            ):
                raise _NoJetStreamError(
                    JetStreamError(
                        code=e.code or 503,
                        err_code=e.err_code or 0,
                        description=e.description or "no responders",
                        subject="$JS.API.CONSUMER.CREATE." + _wire.EVENT_STREAM,
                    )
                ) from None
            raise

    async def _start_service(self) -> None:
        nc = self._client.nc
        self._via_service = True
        sub = await nc.subscribe(
            self._filter,
            pending_msgs_limit=_WATCH_PENDING_MSGS,
            pending_bytes_limit=_WATCH_PENDING_BYTES,
        )
        try:
            await nc.flush(timeout=int(_SERVICE_TIMEOUT))
            if self._from_start or self._since is not None:
                request: dict[str, Any] = {"filter": self._filter}
                if self._since is not None:
                    request["since"] = _wire.rfc3339(self._since)
                page = await self._client._history_page(_wire.filter_tenant(self._filter), request)
                self._until = int(page.get("last_seq") or 0)
                self._take(page)
        except BaseException:
            await sub.unsubscribe()
            raise
        self._sub = sub

    def _take(self, page: Mapping[str, Any]) -> None:
        events = page.get("events")
        events = events if isinstance(events, list) else []
        self._replay.extend(e for e in events if isinstance(e, dict))
        self._more = bool(page.get("more")) and bool(events)

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> RunEvent:
        if self._closed:
            raise StopAsyncIteration
        if not self._started:
            await self.start()
        while True:
            event = await (self._next_service() if self._via_service else self._next_jetstream())
            if event is not None:
                return event

    async def _next_jetstream(self) -> RunEvent | None:
        msg: Msg = await self._sub.next_msg(timeout=None)
        seq: int | None = None
        try:
            seq = msg.metadata.sequence.stream
        except (ValueError, IndexError, AttributeError):
            seq = None
        return _skip_malformed(
            lambda: _wire.decode_answer(
                _wire.single_valued(msg.headers), msg.data, subject=msg.subject, seq=seq
            )
        )

    async def _next_service(self) -> RunEvent | None:
        if self._replay:
            raw = self._replay.popleft()
            if isinstance(raw.get("seq"), int):
                self._last_seq = raw["seq"]
            return self._once(_skip_malformed(lambda: _wire.history_event(raw)))
        if self._more and self._last_seq < self._until:
            self._take(await self._next_page())
            return None
        self._more = False
        msg: Msg = await self._sub.next_msg(timeout=None)
        return self._once(
            _skip_malformed(
                lambda: _wire.decode_answer(
                    _wire.single_valued(msg.headers), msg.data, subject=msg.subject
                )
            )
        )

    async def _next_page(self) -> dict[str, Any]:
        pause = 0.05
        while True:
            try:
                return await self._client._history_page(
                    _wire.filter_tenant(self._filter),
                    {"filter": self._filter, "after_seq": self._last_seq},
                )
            except Exception as e:
                _log.warning(
                    "watching %s: a history request failed (%s); trying again", self._filter, e
                )
            await asyncio.sleep(pause)
            pause = min(2 * pause, 5.0)

    def _once(self, event: RunEvent | None) -> RunEvent | None:
        """event, unless an event of the same id was delivered lately."""
        if event is None:
            return None
        if event.id in self._seen:
            return None
        self._seen[event.id] = None
        if len(self._seen) > _WATCH_DEDUPE_WINDOW:
            self._seen.popitem(last=False)
        return event

    async def aclose(self) -> None:
        """Stops the watch and lets go of its subscription."""
        if self._closed:
            return
        self._closed = True
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except nats.errors.Error as e:
                _log.debug("unsubscribing from %s: %s", self._filter, e)

    async def __aenter__(self) -> Watch:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _skip_malformed(decode: Any) -> RunEvent | None:
    try:
        event: RunEvent = decode()
    except MalformedAnswerError as e:
        _log.warning("skipping an event that is not a toolexec answer: %s", e)
        return None
    return event
