"""The package names the release the Go programs name: the installed
distribution's metadata, `toolexec.__version__`, the Go source's
buildinfo.Release and `executor --version` (semantic versioning there, PEP
440 here) agree."""

from __future__ import annotations

import re
import subprocess
from importlib.metadata import version

import toolexec
from conftest import REPO, GoPrograms

#: A release as the Go side writes it, without the leading "v".
_PRE_RELEASE = r"(?:-(dev|alpha\.\d+|beta\.\d+|rc\.\d+))?"
_RELEASE = r"(\d+\.\d+\.\d+)" + _PRE_RELEASE


def pep440(core: str, pre: str | None) -> str:
    """A Go release (core version and pre-release) in PEP 440's spelling:
    0.1.0-dev is 0.1.0.dev0, 0.1.0-rc.1 is 0.1.0rc1."""
    spelled = core
    if pre == "dev":
        spelled += ".dev0"
    elif pre:
        tag, n = pre.split(".")
        spelled += {"alpha": "a", "beta": "b", "rc": "rc"}[tag] + n
    return spelled


def test_metadata_is_the_module_version() -> None:
    assert version("toolexec") == toolexec.__version__


def test_go_source_names_the_same_release() -> None:
    """Without building anything: the release internal/buildinfo declares."""
    src = (REPO / "internal" / "buildinfo" / "buildinfo.go").read_text(encoding="utf-8")
    m = re.search(r'^const Release = "' + _RELEASE + '"$', src, re.MULTILINE)
    assert m, "internal/buildinfo/buildinfo.go declares no const Release"
    assert pep440(m.group(1), m.group(2)) == toolexec.__version__, (
        m.group(0),
        toolexec.__version__,
    )


def test_executor_names_the_same_release(go_programs: GoPrograms) -> None:
    out = subprocess.run(
        [str(go_programs.executor), "--version"], capture_output=True, check=True, text=True
    ).stdout
    m = re.match(r"^executor version v" + _RELEASE + " ", out)
    assert m, out
    assert pep440(m.group(1), m.group(2)) == toolexec.__version__, (out, toolexec.__version__)
