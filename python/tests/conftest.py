"""Shared fixtures: the repository's vectors; the Go side's programs (the
executor and the emitter) built once per session, to hold the Python
derivation to the Go one; and a real executor for the client's tests, started
once per session (live.py has the pieces)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from live import TOOLS_FILE, Downstream, Executor, Process, clean_env, free_port

#: The repository's root: python/tests/../..
REPO = Path(__file__).resolve().parents[2]


def in_ci() -> bool:
    """Whether the run is CI's (CI=true), where nothing may be skipped for lack
    of a tool."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(condition: bool, why: str) -> None:
    """Skip the test unless condition holds; under CI=true, fail instead."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"{why} (CI=true: nothing is skipped for lack of a tool)")
    pytest.skip(why)


def load_vectors(rel: str) -> list[dict[str, Any]]:
    """The vectors of one of the repository's key vector files."""
    with (REPO / rel).open(encoding="utf-8") as f:
        vectors: list[dict[str, Any]] = json.load(f)["vectors"]
    return vectors


@dataclass(frozen=True)
class GoResult:
    """What the emitter made of one input: the canonical envelope, or the
    code of its refusal."""

    canonical: bytes | None
    code: str | None


_CODE = re.compile(r"no key can be derived \(([a-z_]+)\)")


@dataclass(frozen=True)
class Emitter:
    """The Go side's `emitter key`, built from this repository."""

    path: Path

    def _run(
        self,
        tenant: str,
        run_id: str,
        tool: str,
        raw: bytes,
        key_arguments: Sequence[str] | None,
        *,
        canonical: bool,
    ) -> subprocess.CompletedProcess[bytes]:
        argv = [str(self.path), "key", "--tenant", tenant, "--run", run_id, "--tool", tool]
        argv += ["--args", "-"]
        if key_arguments is not None:
            if any("," in name for name in key_arguments):
                raise ValueError(
                    "the emitter's --key-arguments cannot name an argument with a comma"
                )
            argv += ["--key-arguments", ",".join(key_arguments)]
        if canonical:
            argv.append("--canonical")
        return subprocess.run(argv, input=raw, capture_output=True, check=False, timeout=60)

    def derive(
        self,
        tenant: str,
        run_id: str,
        tool: str,
        raw: bytes,
        key_arguments: Sequence[str] | None,
    ) -> GoResult:
        """The canonical envelope (`key --canonical`), or the refusal's code."""
        p = self._run(tenant, run_id, tool, raw, key_arguments, canonical=True)
        return self._result(p)

    def key(
        self,
        tenant: str,
        run_id: str,
        tool: str,
        raw: bytes,
        key_arguments: Sequence[str] | None,
    ) -> str | None:
        """The key `emitter key` prints, or None when it refuses."""
        p = self._run(tenant, run_id, tool, raw, key_arguments, canonical=False)
        r = self._result(p)
        return None if r.code else p.stdout.decode().removesuffix("\n")

    @staticmethod
    def _result(p: subprocess.CompletedProcess[bytes]) -> GoResult:
        if p.returncode == 0:
            assert p.stdout.endswith(b"\n"), p.stdout
            return GoResult(canonical=p.stdout[:-1], code=None)
        err = p.stderr.decode(errors="replace")
        m = _CODE.search(err)
        if p.returncode != 2 or m is None:
            raise AssertionError(f"emitter key exited {p.returncode}: {err}")
        return GoResult(canonical=None, code=m.group(1))


def go_command() -> str:
    """The go command: $GO, else go on PATH, else /usr/local/go/bin/go; the
    test is skipped (failed under CI=true) when there is none."""
    go = (
        os.environ.get("GO")
        or shutil.which("go")
        or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    )
    need(go is not None, "Go is not installed (/usr/local/go/bin/go): the Go side cannot be built")
    assert go is not None
    return go


@dataclass(frozen=True)
class GoPrograms:
    """The executor and the emitter, built from this repository."""

    executor: Path
    emitter: Path


def _go_build(out: Path, *packages: str) -> None:
    go = go_command()
    p = subprocess.run(
        [go, "build", "-o", str(out), *packages],
        cwd=REPO,
        capture_output=True,
        check=False,
        timeout=900,
    )
    if p.returncode != 0:
        pytest.fail(f"go build {' '.join(packages)}: {p.stderr.decode(errors='replace')}")


@pytest.fixture(scope="session")
def go_programs(tmp_path_factory: pytest.TempPathFactory) -> GoPrograms:
    """`go build -o <tmp> ./cmd/executor ./cmd/emitter`, once per session."""
    out = tmp_path_factory.mktemp("bin")
    _go_build(out, "./cmd/executor", "./cmd/emitter")
    return GoPrograms(executor=out / "executor", emitter=out / "emitter")


@pytest.fixture(scope="session")
def emitter(request: pytest.FixtureRequest) -> Emitter:
    """The emitter, built once per session from ./cmd/emitter (or the binary
    TOOLEXEC_EMITTER names)."""
    given = os.environ.get("TOOLEXEC_EMITTER")
    if given:
        return Emitter(Path(given).resolve())
    programs: GoPrograms = request.getfixturevalue("go_programs")
    return Emitter(programs.emitter)


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nats-server itself, built from the module proxy at the version go.mod
    requires (the one the executors embed)."""
    out = tmp_path_factory.mktemp("nats-server") / "nats-server"
    _go_build(out, "github.com/nats-io/nats-server/v2")
    return out


@pytest.fixture(scope="session")
def executor(
    go_programs: GoPrograms, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Executor]:
    """`executor --demo` with its embedded NATS on a free port and a data
    folder of its own, serving the demo airline and the tools of live.py's
    TOOLS_FILE (a downstream the tests control); shared by the session,
    stopped at its end. Tests keep apart by their run ids and flights."""
    work = tmp_path_factory.mktemp("executor")
    downstream = Downstream()
    tools = work / "tools.yaml"
    tools.write_text(TOOLS_FILE)
    metrics = f"127.0.0.1:{free_port()}"
    argv = [str(go_programs.executor), "--demo", "--tools-file", str(tools)]
    argv += ["--nats-port", "-1", "--data-dir", str(work / "data"), "--metrics-addr", metrics]
    argv += ["--drain-timeout", "2s", "--log-level", "warn"]
    proc = Process(
        "executor", argv, cwd=work, env=clean_env(DOWNSTREAM_URL=downstream.url, HOME=str(work))
    )
    try:
        url = proc.await_line(r"^toolexec executor ready: nats=(\S+)").group(1)
        yield Executor(
            url=url,
            metrics="http://" + metrics,
            emitter=go_programs.emitter,
            downstream=downstream,
            process=proc,
        )
    finally:
        downstream.release_all()
        proc.stop()
        downstream.close()


@pytest.fixture(scope="session")
def workers_executor(
    go_programs: GoPrograms, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Executor]:
    """An executor with no tools of its own (no --demo, no tools file) and
    its embedded NATS on a free port, serving the tools that workers declare:
    it asks them every 200 ms (--workers-interval), so that a worker's tool
    is served within a fraction of a second of its start and forgotten within
    a second of its stop. Shared by the session: the tests keep apart by
    their tools' names, their runs and their flights."""
    work = tmp_path_factory.mktemp("workers-executor")
    metrics = f"127.0.0.1:{free_port()}"
    argv = [str(go_programs.executor), "--nats-port", "-1", "--data-dir", str(work / "data")]
    argv += ["--metrics-addr", metrics, "--drain-timeout", "2s", "--log-level", "warn"]
    argv += ["--workers-interval", "200ms", "--workers-window", "100ms"]
    proc = Process("executor", argv, cwd=work, env=clean_env(HOME=str(work)))
    try:
        url = proc.await_line(r"^toolexec executor ready: nats=(\S+)").group(1)
        yield Executor(
            url=url, metrics="http://" + metrics, emitter=go_programs.emitter, process=proc
        )
    finally:
        proc.stop()
