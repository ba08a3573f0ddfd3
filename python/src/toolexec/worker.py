"""Serving tool bodies over NATS from Python: :class:`Worker` and :func:`serve`.

A worker runs the bodies of tools declared with ``@tool`` for the executors,
which keep everything else (the claim on the key, the lease, the record, the
answer, deduplication): docs/PROTOCOL.md §12, and the Go package ``worker``,
whose behaviour this one follows::

    @tool(idempotency=IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flight",)))
    async def book(flight: str, request_id: str, ctx: ToolContext) -> str:
        \"\"\"Take a seat.\"\"\"
        return await airline.book(flight, idempotency_key=ctx.idempotency_key)

    serve(book, servers="nats://127.0.0.1:4222")   # until SIGTERM or SIGINT

The worker is the NATS service ``toolexec-worker`` (nats-py's ``nats.micro``)
with one endpoint per tool, named as the tool, on ``toolexec.body.<tool>``,
in the queue group ``toolexec.body``, the tool's declaration as JSON in its
metadata ``toolexec.declaration``; executors learn the tools from it. For
each request it

* reads the payload, the call's arguments (a JSON object), and converts each
  argument to the type its parameter's hint names (see :mod:`toolexec._convert`:
  dataclasses, TypedDicts, pydantic models, Enums, Literals, lists, tuples
  and dicts of them; what does not convert is refused ``no_effect``, the body
  never entered);
* fills the :class:`~toolexec.ToolContext` parameter, if the body has one,
  from the headers: ``Idempotency-Key`` (None without it), ``Toolexec-Tenant``,
  ``Toolexec-Run-Id``, ``Toolexec-Call-Id``, ``Toolexec-Tool``,
  ``Toolexec-Attempt`` and ``traceparent``;
* runs the body once, an async one on the event loop, a plain one in a thread
  of the worker's own, bounded by the tool's timeout (30 s for a tool that
  declares none, as the executors' wait for the reply): an async body is then
  cancelled; a plain one cannot be stopped, so it keeps its thread until it
  returns, and what it returns is dropped (the reply went at the timeout);
* replies once: the outcome (a ``str`` as its UTF-8, ``bytes`` as they are,
  anything else as its JSON text: compact, non-ASCII kept, dataclasses,
  pydantic models and Enum members as their JSON values), or an error reply
  of the service API: the code ``no_effect`` for a :class:`~toolexec.NoEffect`
  (the executor frees the key), ``tool_error`` for any other exception or
  the timeout (the effect is unknown: an effectful call is answered
  ``indeterminate``), its description the exception's message on one line,
  at most 1,024 bytes. It never replies with a ``Status`` header.

At most ``concurrency`` bodies run at once; a request that finds no room waits
for it. :meth:`Worker.stop` stops the service first — the subscriptions are
drained, not dropped, so that a request the server delivered before it
dropped them is still answered — then answers the requests still waiting for
room ``no_effect`` (their bodies never entered, their keys freed), lets the
bodies running reply, and returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import enum
import functools
import json
import logging
import os
import re
import signal
import typing
from collections.abc import Generator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

import nats
import nats.errors
from nats.aio.client import Client as NatsClient
from nats.aio.subscription import Subscription
from nats.micro.request import Request
from nats.micro.service import Service, ServiceConfig

from . import _connect, _convert, _schema, _wire
from .errors import NoEffect
from .tools import Tool, ToolContext

__all__ = [
    "CODE_NO_EFFECT",
    "CODE_TOOL_ERROR",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_TIMEOUT",
    "SERVICE",
    "Worker",
    "serve",
]

_log = logging.getLogger("toolexec.worker")

#: The name of the workers' service (docs/PROTOCOL.md §12).
SERVICE: Final = "toolexec-worker"
#: The error code of a body whose effect did not land: the executor frees the key.
CODE_NO_EFFECT: Final = "no_effect"
#: The error code of a body that failed with an effect the worker cannot rule out.
CODE_TOOL_ERROR: Final = "tool_error"
#: The bodies a worker runs at once unless told otherwise.
DEFAULT_CONCURRENCY: Final = 64
#: The bound on a body, in seconds, for a tool that declares no timeout: the
#: executors wait as long for its reply.
DEFAULT_TIMEOUT: Final = 30.0

# An error reply's description travels in a header: one line, bounded.
_MAX_DESCRIPTION: Final = 1024
# How long start and stop wait for the server to have (or drop) the
# subscriptions.
_FLUSH_TIMEOUT: Final = 10.0
_STOPPING: Final = "the worker is stopping"
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?"
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Served:
    """A tool as the worker serves it."""

    tool: Tool[..., Any]
    subject: str
    declaration: str
    timeout: float
    binding: _convert.Binding


class Worker:
    """Serves the bodies of tools declared with ``@tool`` to the executors,
    over NATS (docs/PROTOCOL.md §12). The module's documentation says what it
    does with each request.

    Args:
        nc: A connected nats-py client; the worker uses it and leaves it open
            (see :meth:`connect` for one the worker makes and closes).
        tools: The tools to serve, at least one, each once.
        version: The service's version, a SemVer string.
        description: What the worker is, in its service info.
        concurrency: The bodies that run at once, at most; a request that
            finds no room waits for it. Plain (not async) bodies run in a pool
            of as many threads.
        subjects: A subject to serve a tool on instead of
            ``toolexec.body.<tool>``, by tool name (the executors must be told
            it: a tools file's ``nats.subject``).

    Raises:
        ValueError: No tools, a tool given twice, a concurrency below 1, a
            version that is not SemVer, or a subject that is empty, has a
            wildcard, a space or an empty token, or names no tool served.
        TypeError: Something given as a tool that is not a :class:`Tool`.

    Build it, then :meth:`start` it (or use ``async with``); :meth:`run`
    serves until SIGTERM or SIGINT. All of it on one event loop.
    """

    def __init__(
        self,
        nc: NatsClient,
        *tools: Tool[..., Any],
        version: str = "0.0.0",
        description: str = "",
        concurrency: int = DEFAULT_CONCURRENCY,
        subjects: Mapping[str, str] | None = None,
    ) -> None:
        if not tools:
            raise ValueError("a worker serves at least one tool")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency {concurrency!r}: want a whole number of at least 1")
        if not isinstance(version, str) or not _SEMVER.fullmatch(version):
            raise ValueError(f"version {version!r} is not SemVer (such as 1.0.0)")
        subjects = dict(subjects or {})
        names: set[str] = set()
        for t in tools:
            if not isinstance(t, Tool):
                raise TypeError(f"a worker serves tools declared with @tool, not {t!r}")
            if t.name in names:
                raise ValueError(f"tool {t.name!r} is given twice")
            names.add(t.name)
        for name, subject in subjects.items():
            if name not in names:
                raise ValueError(f"subjects names {name!r}, which is not among the tools")
            _check_subject(name, subject)
        self._nc = nc
        self._version = version
        self._description = description
        self._concurrency = concurrency
        self._served = tuple(
            _Served(
                tool=t,
                subject=subjects.get(t.name, _wire.BODY_PREFIX + t.name),
                declaration=_declaration(t),
                timeout=t.timeout if t.timeout is not None else DEFAULT_TIMEOUT,
                binding=_convert.bind(t.fn, t.context_parameter),
            )
            for t in tools
        )
        self._service: Service | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()  # one per request taken
        self._bodies: set[asyncio.Future[Any]] = set()  # the bodies running
        self._stopping = asyncio.Event()  # set once the service is stopped: no body starts
        self._stopped = asyncio.Event()  # set once stop has returned
        self._stop_lock = asyncio.Lock()
        self._given_up = False
        self._owned = False

    # --- what it is ------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        *tools: Tool[..., Any],
        servers: str | Sequence[str] | None = None,
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
        version: str = "0.0.0",
        description: str = "",
        concurrency: int = DEFAULT_CONCURRENCY,
        subjects: Mapping[str, str] | None = None,
        **options: Any,
    ) -> _Connecting:
        """Connects to NATS with the options :meth:`toolexec.Client.connect`
        takes and returns the worker, started, owning the connection: stopping
        it closes the connection. Await it, or use it as an async context
        manager, which stops it on the way out::

            worker = await Worker.connect(book, servers="nats://host:4222", user="worker",
                                          password=pw)
            async with Worker.connect(book, creds="worker.creds") as worker: ...

        With an account per tenant (deploy/accounts.conf), a worker connects
        as the user ``worker`` of the account WORKERS. The tools and the
        worker's options are :class:`Worker`'s; the connection's are
        :meth:`toolexec.Client.connect`'s (``options``: any other of
        :func:`nats.connect`).
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
        return _Connecting(
            opts,
            functools.partial(
                cls,
                version=version,
                description=description,
                concurrency=concurrency,
                subjects=subjects,
            ),
            tools,
        )

    @property
    def nc(self) -> NatsClient:
        """The NATS connection."""
        return self._nc

    @property
    def id(self) -> str:
        """The service instance's id, which the executors name the worker by
        (in conflicts, say); RuntimeError before :meth:`start`."""
        if self._service is None:
            raise RuntimeError("the worker is not started")
        return self._service.id

    @property
    def tools(self) -> dict[str, Tool[..., Any]]:
        """The tools served, by name."""
        return {s.tool.name: s.tool for s in self._served}

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` has returned."""
        return self._stopped.is_set()

    # --- starting and stopping -------------------------------------------------------

    async def start(self) -> None:
        """Adds the service ``toolexec-worker`` with an endpoint per tool and
        returns once the server has the subscriptions: from then on requests
        reach this worker. The endpoints come before the service's own
        subjects, so that the executors never hear of the worker with some of
        its tools missing. RuntimeError when started before, or stopped.

        Raises the connection's errors, and ValueError when nats-py refuses
        the service or an endpoint."""
        if self._service is not None or self._stopping.is_set():
            raise RuntimeError("a worker starts once")
        service = Service(
            self._nc,
            ServiceConfig(
                name=SERVICE, version=self._version, description=self._description or None
            ),
        )
        self._service = service
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._concurrency, thread_name_prefix="toolexec-worker"
        )
        try:
            for s in self._served:
                await service.add_endpoint(
                    name=s.tool.name,
                    handler=functools.partial(self._take, s),
                    subject=s.subject,
                    queue_group=_wire.BODY_QUEUE,
                    metadata={_wire.DECLARATION_METADATA: s.declaration},
                )
            await service.start()
            await _barrier(self._nc)
        except BaseException:
            with contextlib.suppress(Exception):
                await service.stop()
            self._pool.shutdown(wait=False)
            self._stopping.set()
            self._stopped.set()
            raise
        _log.info(
            "serving %s as %s %s",
            ", ".join(s.tool.name for s in self._served),
            SERVICE,
            service.id,
        )

    async def stop(self, timeout: float | None = None) -> None:
        """Stops taking requests, lets the bodies running reply, and returns;
        closes the connection if the worker made it (:meth:`connect`).

        The service is stopped first: the endpoints' subscriptions are drained
        (the server stops sending requests, and those it sent before are
        taken), then its own subjects. A request taken but still waiting for
        room is answered ``no_effect``, its body never entered, so that its
        caller may call again. The bodies running are waited for, however long
        they take within their tools' timeouts, or, with ``timeout`` (seconds),
        that long: then the async bodies are cancelled and the plain ones
        abandoned in their threads, and each is answered ``tool_error`` (its
        effect is unknown). Safe to call more than once, and from many tasks:
        each returns once the worker is stopped."""
        async with self._stop_lock:
            if self._stopped.is_set():
                return
            try:
                await self._stop(timeout)
            finally:
                self._stopped.set()

    async def _stop(self, timeout: float | None) -> None:
        service = self._service
        if service is not None:
            await _stop_service(service, self._nc)
        # No request reaches the worker any more; those still waiting for room
        # are answered no_effect.
        self._stopping.set()
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
            if pending:
                _log.warning(
                    "%d bodies did not return within %ss of the stop: they are answered "
                    "tool_error (their effect is unknown)",
                    len(self._bodies),
                    timeout,
                )
                self._give_up()
                await asyncio.wait(pending)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if not self._nc.is_closed:
            # The replies are sent before stop returns (and the connection closes).
            with contextlib.suppress(Exception):
                await _barrier(self._nc)
            if self._owned:
                await self._nc.close()

    def _give_up(self) -> None:
        """Cancels the bodies running: each is answered tool_error."""
        self._given_up = True
        for body in list(self._bodies):
            body.cancel()

    async def __aenter__(self) -> Worker:
        if self._service is None:
            await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def run(
        self,
        *,
        drain_timeout: float | None = None,
        signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
    ) -> None:
        """Serves until one of signals comes (or :meth:`stop` is called), then
        stops as :meth:`stop` does, with drain_timeout as its timeout, and
        returns. A second signal during the stop gives up on the bodies still
        running at once (each is answered ``tool_error``). Starts the worker
        first if it is not started. The signals are handled only where asyncio
        can (the main thread, on Unix); the handlers are removed on return."""
        if self._service is None:
            await self.start()
        loop = asyncio.get_running_loop()
        asked = asyncio.Event()
        installed: list[signal.Signals] = []

        def on_signal(sig: signal.Signals) -> None:
            if asked.is_set():
                _log.warning("%s again: giving up on the bodies still running", sig.name)
                self._give_up()
                return
            _log.info("%s: stopping (the bodies running reply first)", sig.name)
            asked.set()

        for sig in signals:
            try:
                loop.add_signal_handler(sig, on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            installed.append(sig)
        try:
            asked_task = asyncio.ensure_future(asked.wait())
            stopped_task = asyncio.ensure_future(self._stopped.wait())
            try:
                await asyncio.wait({asked_task, stopped_task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                asked_task.cancel()
                stopped_task.cancel()
            await self.stop(drain_timeout)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    # --- requests ----------------------------------------------------------------------

    async def _take(self, served: _Served, req: Request) -> None:
        """The endpoint's handler: hands the request to a task of its own and
        returns at once, so that the subscription's other requests are taken
        too (nats-py calls a subscription's handler for one message at a
        time) and a drain ends as soon as the server has sent its last
        request. It never raises: nats-py would reply an error of its own."""
        task = asyncio.create_task(self._serve(served, req))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, served: _Served, req: Request) -> None:
        if not await self._room():
            await self._reply(served, req, None, NoEffect(_STOPPING))
            return
        try:
            outcome, err = await self._run(served, req)
            await self._reply(served, req, outcome, err)
        finally:
            self._slots.release()

    async def _room(self) -> bool:
        """Takes a slot for a body: True once taken, False once the worker is
        stopping (then no slot is held)."""
        if self._stopping.is_set():
            return False
        if not self._slots.locked():
            await self._slots.acquire()
            return True
        acquire = asyncio.ensure_future(self._slots.acquire())
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({acquire, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not acquire.done():
                acquire.cancel()
        # Taken, even as the stop came: the body runs and replies.
        with contextlib.suppress(asyncio.CancelledError):
            await acquire
            return True
        return False

    async def _run(
        self, served: _Served, req: Request
    ) -> tuple[bytes | None, BaseException | None]:
        """Enters the body once for req, bounded by the tool's timeout: its
        outcome encoded, or the error to reply."""
        t = served.tool
        try:
            args = _arguments(req.data)
            kwargs = served.binding.arguments(args)
        except (ValueError, _convert.ConversionError) as e:
            return None, NoEffect(f"decoding the arguments of {t.name}: {e}")
        if served.binding.context is not None:
            kwargs[served.binding.context] = _context(req.headers or {}, t.name)
        loop = asyncio.get_running_loop()
        body: asyncio.Future[Any]
        if t.is_async:
            body = asyncio.ensure_future(t.fn(**kwargs))
        else:
            assert self._pool is not None
            ctx = contextvars.copy_context()
            call = functools.partial(t.fn, **kwargs)
            body = asyncio.wrap_future(self._pool.submit(ctx.run, call), loop=loop)
        self._bodies.add(body)
        try:
            async with asyncio.timeout(served.timeout) as bound:
                result = await body
        except TimeoutError as e:
            if bound.expired():
                body.cancel()
                return None, TimeoutError(
                    f"tool {t.name} did not return within its timeout, {served.timeout:g}s"
                )
            return None, e
        except asyncio.CancelledError:
            if not self._given_up:
                raise
            return None, RuntimeError(
                f"the worker stopped before the body of {t.name} returned "
                "(a plain body may still be running in its thread)"
            )
        except Exception as e:
            return None, e
        except BaseException as e:  # KeyboardInterrupt, SystemExit: raised by the body
            # Replied as a failure, and then let through.
            await self._reply(served, req, None, e)
            raise
        finally:
            self._bodies.discard(body)
        try:
            return _outcome(result), None
        except (TypeError, ValueError) as e:  # UnicodeEncodeError is a ValueError
            return None, TypeError(f"the outcome of {t.name} cannot be sent: {e}")

    async def _reply(
        self, served: _Served, req: Request, outcome: bytes | None, err: BaseException | None
    ) -> None:
        """Sends the outcome, or err as an error reply: no_effect for a
        NoEffect, tool_error for anything else."""
        try:
            if err is None:
                assert outcome is not None
                try:
                    await req.respond(outcome)
                    return
                except nats.errors.MaxPayloadError:
                    err = ValueError(
                        f"the outcome of {served.tool.name} is {len(outcome)} bytes, more than "
                        f"the server's max_payload ({self._nc.max_payload})"
                    )
            code = CODE_NO_EFFECT if isinstance(err, NoEffect) else CODE_TOOL_ERROR
            await req.respond_error(code, _describe(err))
        except Exception as e:
            _log.error(
                "the reply to a call of %s could not be sent; the executor will not learn "
                "the outcome (call %s): %s",
                served.tool.name,
                (req.headers or {}).get(_wire.CALL_HEADER, "?"),
                e,
            )


class _Connecting:
    """What :meth:`Worker.connect` returns: await it, or enter it."""

    def __init__(
        self, options: dict[str, Any], make: Any, tools: tuple[Tool[..., Any], ...]
    ) -> None:
        self._options = options
        self._make = make
        self._tools = tools
        self._worker: Worker | None = None

    async def _open(self) -> Worker:
        nc = await nats.connect(**self._options)
        try:
            worker: Worker = self._make(nc, *self._tools)
            worker._owned = True
            await worker.start()
        except BaseException:
            await nc.close()
            raise
        return worker

    def __await__(self) -> Generator[Any, None, Worker]:
        return self._open().__await__()

    async def __aenter__(self) -> Worker:
        self._worker = await self._open()
        return self._worker

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._worker is not None:
            await self._worker.stop()


def serve(
    *tools: Tool[..., Any],
    servers: str | Sequence[str] | None = None,
    drain_timeout: float | None = None,
    **options: Any,
) -> None:
    """Serves tools until SIGTERM or SIGINT, then stops gracefully (the
    bodies running reply first) and returns: the whole life of a worker
    process, on an event loop of its own (:func:`asyncio.run`)::

        if __name__ == "__main__":
            serve(book, lookup_fare, servers="nats://host:4222", version="1.0.0")

    Args:
        tools: The tools to serve.
        servers: The NATS server URL(s); default ``$NATS_URL``, else
            ``nats://127.0.0.1:4222``.
        drain_timeout: How long, in seconds, the bodies running may take once
            the signal came; None: as long as their tools' timeouts let them.
        options: :meth:`Worker.connect`'s other options (the connection's,
            and ``version``, ``description``, ``concurrency``, ``subjects``).
    """

    async def main() -> None:
        worker = await Worker.connect(*tools, servers=servers, **options)
        try:
            await worker.run(drain_timeout=drain_timeout)
        finally:
            await worker.stop()

    asyncio.run(main())


# --- the parts ---------------------------------------------------------------------------


async def _stop_service(service: Service, nc: NatsClient) -> None:
    """Stops the service, draining its endpoints' subscriptions: the server
    drops them, and the requests it sent before are taken (each gets a task).

    nats-py's Service.stop unsubscribes from the endpoints instead, which
    throws away the requests delivered but not yet handed to the handler, and
    those the server sends before it has the unsubscription: nobody would
    reply to them, and the executors would wait them out as timeouts (an
    effectful call then indeterminate, with nothing run). So the endpoints'
    subscriptions are drained here first, as nats.go's micro does; then the
    service stops what is left, its own subjects."""
    if nc.is_closed:
        return  # nothing to stop, nor any reply to send
    endpoints = getattr(service, "_endpoints", None)
    subs = [getattr(e, "_subscription", None) for e in endpoints or ()]
    if isinstance(endpoints, list) and all(isinstance(sub, Subscription) for sub in subs):
        results = await asyncio.gather(
            *(_drain(nc, sub) for sub in subs if isinstance(sub, Subscription)),
            return_exceptions=True,
        )
        for r in results:
            if isinstance(r, Exception):
                _log.warning("stopping the worker's service: an endpoint's drain failed: %s", r)
        endpoints.clear()  # drained: nothing is left for the service to unsubscribe there
    try:
        await service.stop()
    except Exception as e:  # the connection closed meanwhile
        _log.warning("stopping the worker's service: %s", e)


async def _drain(nc: NatsClient, sub: Subscription) -> None:
    """Drains sub: the server drops it, and what it delivered before is taken.

    nats-py's Subscription.drain queues the UNSUB and then writes its PING
    straight to the socket, ahead of it: the PONG can come back before the
    server has the UNSUB, and a request routed to the subscription in between
    arrives once the subscription is gone, and is dropped. So the UNSUB goes
    out first, written to the socket, and the drain's own (repeated) UNSUB,
    for a subscription the server no longer has, changes nothing."""
    sid = getattr(sub, "_id", None)
    unsubscribe = getattr(nc, "_send_unsubscribe", None)
    if isinstance(sid, int) and callable(unsubscribe):
        await unsubscribe(sid)
        await _written(nc)
    await typing.cast(Any, sub).drain()


async def _written(nc: NatsClient) -> None:
    """Returns once what the connection has queued is written to its socket
    (nats-py's flush writes its PING ahead of it)."""
    flush_pending = getattr(nc, "_flush_pending", None)
    if callable(flush_pending):
        await flush_pending(force_flush=True)
    else:  # the PONG of one flush comes after the writer has run
        await nc.flush(timeout=int(_FLUSH_TIMEOUT))


async def _barrier(nc: NatsClient) -> None:
    """Returns once the server has everything the connection sent so far
    (subscriptions, replies)."""
    await _written(nc)
    await nc.flush(timeout=int(_FLUSH_TIMEOUT))


def _declaration(t: Tool[..., Any]) -> str:
    """The tool's declaration as an endpoint's metadata carries it: §8's JSON,
    with the timeout the executors assume (30 s) written out when the tool
    declares none, as the Go worker does."""
    d = t.declaration()
    d.setdefault("timeout_ms", round(DEFAULT_TIMEOUT * 1000))
    return json.dumps(d, ensure_ascii=False, separators=(",", ":"))


def _check_subject(name: str, subject: str) -> None:
    if not isinstance(subject, str) or not subject:
        raise ValueError(f"the subject of tool {name!r} is empty")
    for i, token in enumerate(subject.split(".")):
        if not token:
            raise ValueError(f"the subject of tool {name!r}, {subject!r}, has an empty token ({i})")
        for c in token:
            if c <= " " or c == "\x7f" or c in "*>":
                raise ValueError(
                    f"the subject of tool {name!r}, {subject!r}, holds {c!r}: a subject to "
                    "serve on has no wildcards, spaces or control characters"
                )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _arguments(data: bytes) -> dict[str, Any]:
    """The request's payload: the call's arguments, a JSON object."""
    try:
        args = json.loads(data or b"{}", parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"the payload is not JSON: {e}") from None
    if not isinstance(args, dict):
        raise ValueError("the payload is not a JSON object")
    return args


def _context(headers: Mapping[str, str], name: str) -> ToolContext:
    """The call's context, from a request's headers (their names as §12
    spells them)."""
    try:
        attempt = int(headers.get(_wire.ATTEMPT_HEADER, ""))
    except ValueError:
        attempt = 0
    return ToolContext(
        tenant=headers.get(_wire.TENANT_HEADER, ""),
        run_id=headers.get(_wire.RUN_HEADER, ""),
        call_id=headers.get(_wire.CALL_HEADER, ""),
        tool=headers.get(_wire.TOOL_HEADER) or name,
        idempotency_key=headers.get(_wire.KEY_HEADER) or None,
        attempt=attempt,
        traceparent=headers.get(_wire.TRACEPARENT_HEADER) or None,
    )


def _json_value(value: object) -> Any:
    """json.dumps's default: what the outcome holds that JSON has no type
    for."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if _schema.is_pydantic_model(type(value)):
        return typing.cast(Any, value).model_dump(mode="json")
    raise TypeError(f"{type(value).__qualname__} is not JSON")


def _outcome(result: object) -> bytes:
    """A body's result as the reply's payload: a str as its UTF-8, bytes as
    they are, anything else as its JSON text."""
    if isinstance(result, str):
        return result.encode()
    if isinstance(result, (bytes, bytearray, memoryview)):
        return bytes(result)
    return json.dumps(
        result, default=_json_value, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode()


def _describe(err: BaseException) -> str:
    """err for the Nats-Service-Error header: its message (the exception's
    type when it has none, or is not a NoEffect's or the worker's own), one
    line, control characters as spaces, no spaces at the ends (a header's
    value loses them), at most _MAX_DESCRIPTION bytes of UTF-8, never empty."""
    text = str(err)
    if not isinstance(err, NoEffect):
        text = f"{type(err).__qualname__}: {text}" if text else type(err).__qualname__
    text = "".join(" " if c < " " or c == "\x7f" else c for c in text).strip()
    raw = text.encode("utf-8", "replace")
    if len(raw) > _MAX_DESCRIPTION:
        text = raw[:_MAX_DESCRIPTION].decode("utf-8", "ignore")
    return text or "failed"
