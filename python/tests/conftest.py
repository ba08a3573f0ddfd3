"""Shared fixtures: the repository's vectors, and the Go side's emitter built
once per session, to hold the Python derivation to the Go one."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture(scope="session")
def emitter(tmp_path_factory: pytest.TempPathFactory) -> Emitter:
    """The emitter, built once per session from ./cmd/emitter (or the binary
    TOOLEXEC_EMITTER names)."""
    given = os.environ.get("TOOLEXEC_EMITTER")
    if given:
        return Emitter(Path(given).resolve())
    go = go_command()
    out = tmp_path_factory.mktemp("emitter") / "emitter"
    p = subprocess.run(
        [go, "build", "-o", str(out), "./cmd/emitter"],
        cwd=REPO,
        capture_output=True,
        check=False,
        timeout=900,
    )
    if p.returncode != 0:
        pytest.fail(f"go build ./cmd/emitter: {p.stderr.decode(errors='replace')}")
    return Emitter(out)
