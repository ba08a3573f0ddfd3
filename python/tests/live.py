"""Real executors for the client's tests: the Go programs of this repository,
run as processes, and a downstream HTTP service the tests control.

The fixtures of conftest.py build the programs once per session and start
what each module needs; what they share lives here."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: How long one test's asyncio part may take before it fails instead of hanging.
TEST_LIMIT = 60.0


def run(main: Coroutine[Any, Any, T], limit: float = TEST_LIMIT) -> T:
    """Runs main on a fresh event loop, failing after limit seconds."""

    async def bounded() -> T:
        async with asyncio.timeout(limit):
            return await main

    return asyncio.run(bounded())


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (yet)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a Go program of ours: without the developer's NATS
    and toolexec settings (NATS_URL would point an executor elsewhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "TOOLEXEC_"))}
    env.update(extra)
    return env


class Process:
    """A program started in a session of its own, its output in files."""

    def __init__(
        self, name: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> None:
        self.name = name
        self.out = cwd / f"{name}.out"
        self._out = self.out.open("wb")
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def await_line(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """Waits until the output matches pattern (a regular expression)."""
        rx = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.output())
            if m:
                return m
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited ({self.proc.returncode}) before printing "
                    f"{pattern!r}:\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not print {pattern!r}:\n{self.output()}")
            time.sleep(0.05)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within timeout."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._out.close()


class Downstream:
    """An HTTP service the executor's tools file points at, for tools whose
    behaviour the tests decide:

    * ``POST /hold``: answers ``held <ticket>`` once the test releases the
      call's ``ticket`` (an argument); counts the requests per ticket.
    * ``POST /refuse``: 409 Conflict, which says the effect did not land.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[str, threading.Event] = {}
        self.entered: dict[str, int] = {}
        downstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/hold":
                    ticket = str(json.loads(body).get("ticket"))
                    with downstream._lock:
                        downstream.entered[ticket] = downstream.entered.get(ticket, 0) + 1
                    downstream.gate(ticket).wait(90)
                    self._answer(200, f"held {ticket}")
                elif self.path == "/refuse":
                    self._answer(409, "no seats left on this flight")
                else:
                    self._answer(404, "no such path")

            def _answer(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def gate(self, ticket: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(ticket, threading.Event())

    def release(self, ticket: str) -> None:
        self.gate(ticket).set()

    def held(self, ticket: str) -> int:
        with self._lock:
            return self.entered.get(ticket, 0)

    def release_all(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for g in gates:
            g.set()

    def close(self) -> None:
        self.release_all()
        self._server.shutdown()
        self._server.server_close()


#: The tools the test executors serve besides the demo's (a tools file).
TOOLS_FILE = """\
tools:
  - name: hold
    description: Test only. Answers when the test releases the ticket.
    idempotency: {kind: effectful}
    timeout: 60s
    parameters:
      type: object
      properties: {ticket: {type: string}}
      required: [ticket]
      additionalProperties: false
    http: {url: "${DOWNSTREAM_URL}/hold"}
  - name: refuse
    description: Test only. The downstream refuses before acting.
    idempotency: {kind: effectful}
    timeout: 10s
    parameters: {type: object}
    http: {url: "${DOWNSTREAM_URL}/refuse"}
"""


@dataclass
class Executor:
    """A running executor, and what the tests read off it."""

    url: str
    metrics: str
    emitter: Path
    downstream: Downstream | None = None
    process: Process | None = field(default=None, repr=False)

    def bodies(self, tool: str) -> int:
        """How many times the executor entered tool's body (its
        toolexec_bodies_entered_total counter)."""
        with urllib.request.urlopen(self.metrics + "/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(
            rf'^toolexec_bodies_entered_total\{{tool="{re.escape(tool)}"\}} (\d+)$',
            text,
            re.MULTILINE,
        )
        return int(m.group(1)) if m else 0

    def emitter_run(self, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
        """Runs the emitter against this executor's server; its exit status
        and output (stdout, then stderr)."""
        p = subprocess.run(
            [str(self.emitter), "-s", self.url, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(**(env or {})),
            check=False,
        )
        return p.returncode, p.stdout + p.stderr

    def emitter_json(self, *args: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The emitter's --json output of a command that prints one object."""
        rc, out = self.emitter_run("--json", *args, env=env)
        try:
            value: dict[str, Any] = json.loads(out.splitlines()[0])
        except (ValueError, IndexError):
            raise AssertionError(f"emitter {' '.join(args)} exited {rc}: {out}") from None
        return value
