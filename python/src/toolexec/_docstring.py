"""What a tool's docstring says, Google style: the summary (the first
paragraph) and one line per argument in its ``Args:`` section (or a class's
``Attributes:``).

    Book a seat on a flight.

    Args:
        flight: The flight's number, such as BA117.
        seats (int): How many seats; continuation lines, indented
            further, join the description.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^(\w[\w ]*):\s*$")
_ENTRY = re.compile(r"^\**([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(.*)$")
_ARGS_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args"})
_ATTRIBUTE_SECTIONS = frozenset({"attributes"})
_KNOWN_SECTIONS = (
    _ARGS_SECTIONS
    | _ATTRIBUTE_SECTIONS
    | {
        "returns",
        "return",
        "yields",
        "raises",
        "example",
        "examples",
        "note",
        "notes",
        "see also",
        "warning",
        "warnings",
        "todo",
        "references",
    }
)


@dataclass(frozen=True)
class Docstring:
    """The parts of a docstring a declaration uses."""

    summary: str = ""
    args: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse(doc: str | None) -> Docstring:
    """The summary and the described arguments and attributes of doc."""
    if not doc or not doc.strip():
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()

    summary: list[str] = []
    for line in lines:
        m = _HEADER.match(line.strip())
        if not line.strip() or (m and m.group(1).lower() in _KNOWN_SECTIONS):
            break
        summary.append(line.strip())

    sections: dict[str, dict[str, str]] = {"args": {}, "attributes": {}}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _HEADER.match(line.strip())
        name = m.group(1).lower() if m else ""
        if name in _ARGS_SECTIONS or name in _ATTRIBUTE_SECTIONS:
            target = sections["args" if name in _ARGS_SECTIONS else "attributes"]
            i = _read_entries(lines, i + 1, _indent(line), target)
            continue
        i += 1
    return Docstring(
        summary=" ".join(summary),
        args=sections["args"],
        attributes=sections["attributes"],
    )


def _read_entries(lines: list[str], i: int, header_indent: int, into: dict[str, str]) -> int:
    """Reads the entries of a section starting at line i; returns the line
    after the section."""
    entry_indent: int | None = None
    current: str | None = None
    parts: list[str] = []

    def close() -> None:
        if current is not None:
            into[current] = " ".join(p for p in parts if p)

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if indent <= header_indent:
            break
        if entry_indent is None:
            entry_indent = indent
        if indent <= entry_indent:
            m = _ENTRY.match(line.strip())
            if m is None:
                break  # not an entry: the section is over
            close()
            current, parts = m.group(1), [m.group(2).strip()]
        else:
            parts.append(line.strip())
        i += 1
    close()
    return i
