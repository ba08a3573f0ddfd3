"""The package names the release the Go programs name: the installed
distribution's metadata, `toolexec.__version__` and `executor --version`
(semantic versioning there, PEP 440 here) agree."""

from __future__ import annotations

import re
import subprocess
from importlib.metadata import version

import toolexec
from conftest import GoPrograms


def test_metadata_is_the_module_version() -> None:
    assert version("toolexec") == toolexec.__version__


def test_executor_names_the_same_release(go_programs: GoPrograms) -> None:
    out = subprocess.run(
        [str(go_programs.executor), "--version"], capture_output=True, check=True, text=True
    ).stdout
    pre_release = r"(?:-(dev|alpha\.\d+|beta\.\d+|rc\.\d+))?"
    m = re.match(r"^executor version v(\d+\.\d+\.\d+)" + pre_release + " ", out)
    assert m, out
    core, pre = m.group(1), m.group(2)
    spelled = core
    if pre == "dev":
        spelled += ".dev0"
    elif pre:
        tag, n = pre.split(".")
        spelled += {"alpha": "a", "beta": "b", "rc": "rc"}[tag] + n
    assert spelled == toolexec.__version__, (out, toolexec.__version__)
