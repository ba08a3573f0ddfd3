"""The package's public names, held to the committed list in public_api.txt:
every public module's ``__all__``, each name's kind and value or signature,
and the public members of its classes with theirs. Callers of a released
package use these names, so a removal or a change breaks them; an addition
is compatible, and recorded the same way.

To record a deliberate change (said so in CHANGELOG.md), from python/:

    TOOLEXEC_UPDATE_PUBLIC_API=1 python -m pytest tests/test_public_api.py
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import toolexec

#: The committed list.
API_FILE = Path(__file__).with_name("public_api.txt")
#: The variable that makes the test write the list instead of checking it.
UPDATE_ENV = "TOOLEXEC_UPDATE_PUBLIC_API"

#: The public modules: the package and each submodule without a leading
#: underscore, which the package's docstring names.
MODULES = [
    "toolexec",
    "toolexec.client",
    "toolexec.errors",
    "toolexec.events",
    "toolexec.keys",
    "toolexec.tools",
    "toolexec.worker",
]

#: Members every class has, or that dataclass and enum write, that say
#: nothing of the API beyond what the lines about the class already say
#: (the pickling of errors has tests of its own).
_GENERATED = {
    "__annotations__",
    "__dataclass_fields__",
    "__dataclass_params__",
    "__dict__",
    "__doc__",
    "__firstlineno__",
    "__hash__",
    "__match_args__",
    "__module__",
    "__new__",
    "__orig_bases__",
    "__parameters__",
    "__qualname__",
    "__reduce__",
    "__slots__",
    "__static_attributes__",
    "__weakref__",
}
#: What @dataclass writes, which its line on the class says.
_DATACLASS = {"__repr__", "__eq__", "__setattr__", "__delattr__", "__getstate__", "__setstate__"}

_HEADER = f"""\
# The public API of the Python package toolexec, as tests/test_public_api.py
# lists it. The test fails when the package differs from this file: a removed
# or changed line breaks callers of the released package. To record a
# deliberate change (said so in CHANGELOG.md): {UPDATE_ENV}=1 python -m pytest
# tests/test_public_api.py, from python/, and commit this file.
"""


def _qualified(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _is_toolexec(cls: type) -> bool:
    return cls.__module__ == "toolexec" or cls.__module__.startswith("toolexec.")


def _class_lines(cls: type) -> Iterator[str]:
    name = _qualified(cls)
    bases = ", ".join(_qualified(b) for b in cls.__bases__)
    line = f"{name}: class({bases})"
    params = getattr(cls, "__dataclass_params__", None)
    if params is not None:
        line += f" dataclass(frozen={params.frozen}, eq={params.eq}, order={params.order})"
    yield line
    if issubclass(cls, enum.Enum):
        for m in cls:
            yield f"{name}.{m.name} = {m.value!r}"
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            yield f"{name}.{f.name}: field {f.type}"
    skip = _GENERATED | (_DATACLASS if dataclasses.is_dataclass(cls) else set())
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not _is_toolexec(klass):
            continue
        for member, value in vars(klass).items():
            if member in seen or member in skip or member in getattr(cls, "__members__", {}):
                continue
            if member.startswith("_") and not (member.startswith("__") and member.endswith("__")):
                continue
            seen.add(member)
            yield from _member_lines(cls, name, member, value)
    if not dataclasses.is_dataclass(cls):
        for attr in sorted(_instance_attributes(cls) - seen):
            yield f"{name}.{attr}: attribute"


def _instance_attributes(cls: type) -> set[str]:
    """The public attributes the toolexec classes of cls's MRO declare or set
    on self in __init__."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not _is_toolexec(klass):
            continue
        names.update(n for n in vars(klass).get("__annotations__", {}) if not n.startswith("_"))
        init = vars(klass).get("__init__")
        if not inspect.isfunction(init):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            names.update(
                t.attr
                for t in targets
                if isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
                and not t.attr.startswith("_")
            )
    return names


def _member_lines(cls: type, name: str, member: str, value: Any) -> Iterator[str]:
    at = f"{name}.{member}"
    if isinstance(value, property):
        yield f"{at}: property{_return(value.fget)}"
    elif isinstance(value, classmethod):
        yield f"{at}: classmethod{_signature(getattr(cls, member))}"
    elif isinstance(value, staticmethod):
        yield f"{at}: staticmethod{_signature(value.__func__)}"
    elif inspect.isfunction(value):
        kind = "async method" if inspect.iscoroutinefunction(value) else "method"
        yield f"{at}: {kind}{_signature(value)}"
    elif callable(value) and not isinstance(value, type):
        return  # a slot the base type's machinery copied in (StrEnum's __str__)
    elif dataclasses.is_dataclass(cls) and member in {f.name for f in dataclasses.fields(cls)}:
        return  # a field's default: the __init__ line says it
    else:
        yield f"{at}: {_value(value)}"


def _return(fget: Any) -> str:
    if fget is None:
        return ""
    r = inspect.signature(fget).return_annotation
    return "" if r is inspect.Signature.empty else f" -> {r}"


def _value(value: Any) -> str:
    if value is None or isinstance(value, (str, int, float, bool, tuple, frozenset)):
        return f"= {value!r}"
    return f"{type(value).__name__}"


def _name_lines(module: str, name: str, obj: Any) -> Iterator[str]:
    at = f"{module}.{name}"
    if name == "__version__":
        yield f"{at}: str"  # its value is the release (tests/test_version.py)
        return
    defined = getattr(obj, "__module__", None)
    if isinstance(obj, type) or inspect.isfunction(obj):
        if defined != module:
            yield f"{at} = {_qualified(obj)}"
            return
        if isinstance(obj, type):
            yield from _class_lines(obj)
            return
        kind = "async function" if inspect.iscoroutinefunction(obj) else "function"
        yield f"{at}: {kind}{_signature(obj)}"
        return
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        yield f"{at} = {obj!r}"
        return
    yield f"{at} = {obj!r}"  # a type alias, written as typing writes it


def api_lines() -> list[str]:
    """Every line of the public API, module by module."""
    lines: list[str] = []
    for module in MODULES:
        m = importlib.import_module(module)
        names: list[str] = list(m.__all__)
        lines.append(f"module {module}")
        for name in sorted(names):
            lines.extend(_name_lines(module, name, getattr(m, name)))
    return lines


def _key(line: str) -> str:
    """What a line is about: the qualified name before its description."""
    return re.split(r"[:(= ]", line, maxsplit=1)[0]


def describe(committed: list[str], current: list[str]) -> list[str]:
    """The changes from committed to current, one line each."""
    old = {_key(line): line for line in committed}
    new = {_key(line): line for line in current}
    out = []
    for k in sorted(old.keys() | new.keys()):
        if k not in new:
            out.append(f"removed: {old[k]}")
        elif k not in old:
            out.append(f"added:   {new[k]}")
        elif old[k] != new[k]:
            out.append(f"changed: {old[k]}\n     now: {new[k]}")
    return out


def test_public_names_are_the_committed_ones() -> None:
    current = api_lines()
    if os.environ.get(UPDATE_ENV):
        API_FILE.write_text(_HEADER + "\n".join(current) + "\n", encoding="utf-8")
        return
    committed = [
        line
        for line in API_FILE.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    if committed == current:
        return
    changes = describe(committed, current) or ["the same lines, in another order"]
    raise AssertionError(
        f"the public API of toolexec {toolexec.__version__} differs from {API_FILE.name}:\n  "
        + "\n  ".join(changes)
        + "\nA removed or changed name breaks callers of the released package; an addition"
        " is compatible but recorded too. If the change is deliberate, say so in"
        f" CHANGELOG.md and record it, from python/:\n  {UPDATE_ENV}=1 python -m pytest"
        " tests/test_public_api.py\nthen commit the file."
    )


def test_every_module_exports_what_all_names() -> None:
    """Each name of a public module's __all__ exists, and the package
    exports every public module's names."""
    package = set(toolexec.__all__)
    for module in MODULES:
        m = importlib.import_module(module)
        for name in m.__all__:
            assert hasattr(m, name), f"{module}.__all__ names {name}, which it lacks"
            if module != "toolexec" and not name.isupper() and name not in package:
                raise AssertionError(f"toolexec does not export {module}.{name}")
