"""Declaring tools: what repeating each one does, and what identifies its effect.

A tool is a function whose arguments come from a model's tool call. ``@tool``
reads its declaration off the function: the name, the description (the
docstring's first paragraph), the parameters' JSON Schema (from the type
hints, each parameter described by the docstring's ``Args:`` section), and the
idempotency policy, which says what running it twice would do::

    @tool(idempotency=IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flight",)))
    async def book(flight: str, request_id: str, ctx: ToolContext) -> str:
        \"\"\"Book one seat.

        Args:
            flight: Flight number, such as BA117.
            request_id: The caller's own id of this attempt (not part of the key).
        \"\"\"
        return await airline.book(flight, idempotency_key=ctx.idempotency_key)

The decorated function is still the function (``await book("BA117", "r1",
ctx)`` runs it) and also a :class:`Tool`, whose :meth:`Tool.declaration` is
the entry of the executors' tool catalog (docs/PROTOCOL.md §8). Mistakes in a
declaration are refused when the decorator runs, never at the call that
matters: a key or check argument that is not a parameter is an
:class:`~toolexec.errors.UnknownArgumentError`.

A tool without ``idempotency`` has no kind: nothing is claimed or recorded for
it, and its retry policy is the only one that applies.
"""

from __future__ import annotations

import copy
import datetime
import enum
import functools
import inspect
import math
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

from . import _docstring, _schema
from .errors import DeclarationError, UnknownArgumentError

__all__ = [
    "Idempotency",
    "IdempotencyPolicy",
    "Tool",
    "ToolContext",
    "tool",
]

P = ParamSpec("P")
R = TypeVar("R")

#: What a tool's name may be: a token of NATS subjects (docs/PROTOCOL.md §2).
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")


class Idempotency(enum.StrEnum):
    """What repeating a tool call does; the values are the wire's kinds.

    ============  ========================================  =======  ============
    kind          meaning                                   retried  deduplicated
    ============  ========================================  =======  ============
    READ_ONLY     reads, changes nothing                    yes      no
    IDEMPOTENT    writes; repeating lands the same state    yes      yes
    EFFECTFUL     repeating it is a second effect           never    yes
    ============  ========================================  =======  ============

    An effectful tool that fails after it started leaves its key
    indeterminate: the run stops with an IndeterminateOutcomeError rather than
    risk a second effect.
    """

    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    EFFECTFUL = "effectful"

    @property
    def deduplicated(self) -> bool:
        """Whether calls of this kind claim a key, so that a repeat is answered
        from the record instead of running again."""
        return self is not Idempotency.READ_ONLY

    @property
    def retried(self) -> bool:
        """Whether a failed call of this kind may be tried again."""
        return self is not Idempotency.EFFECTFUL


def _names(
    value: Iterable[str] | None, field: str, *, none_is_empty: bool
) -> tuple[str, ...] | None:
    if value is None:
        return () if none_is_empty else None
    if isinstance(value, (str, bytes)):
        raise TypeError(
            f"{field} is a sequence of argument names, not one string: did you mean ({value!r},)?"
        )
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(
            f"{field} is a sequence of argument names, not {type(value).__qualname__}"
        ) from None
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{field} names arguments with str, not {type(name).__qualname__}")
        if name in seen:
            raise DeclarationError("is listed twice", field=field, argument=name)
        seen.add(name)
    return names


@dataclass(frozen=True, init=False)
class IdempotencyPolicy:
    """A tool's idempotency declaration.

    Args:
        kind: What repeating the tool does (an :class:`Idempotency`, or its
            wire name such as ``"effectful"``).
        key_arguments: The arguments that identify the effect, so that a retry
            that differs in anything else (a fresh request id, a timestamp the
            model wrote again) is the same key. None means every argument; an
            empty sequence means none (the key is the tenant, run and tool).
        check_arguments: Arguments outside the key that must not change
            between a call and its duplicates: a duplicate whose values differ
            is rejected (``arguments_mismatch``) instead of answered. None
            means none.

    Each name must be a parameter of the tool it is given to; ``@tool``
    refuses the declaration otherwise. A name listed twice is refused here.
    """

    kind: Idempotency
    key_arguments: tuple[str, ...] | None
    check_arguments: tuple[str, ...]

    def __init__(
        self,
        kind: Idempotency | str,
        key_arguments: Iterable[str] | None = None,
        check_arguments: Iterable[str] | None = None,
    ) -> None:
        if not isinstance(kind, str):
            raise TypeError(
                f"kind is an Idempotency (READ_ONLY, IDEMPOTENT or EFFECTFUL), not "
                f"{type(kind).__qualname__}"
            )
        try:
            resolved = Idempotency(kind)
        except ValueError:
            known = ", ".join(k.value for k in Idempotency)
            raise DeclarationError(
                f"unknown kind {kind!r} (kinds: {known})", field="idempotency.kind"
            ) from None
        object.__setattr__(self, "kind", resolved)
        object.__setattr__(
            self,
            "key_arguments",
            _names(key_arguments, "idempotency.key_arguments", none_is_empty=False),
        )
        object.__setattr__(
            self,
            "check_arguments",
            _names(check_arguments, "idempotency.check_arguments", none_is_empty=True),
        )

    def __repr__(self) -> str:
        parts = [f"Idempotency.{self.kind.name}"]
        if self.key_arguments is not None:
            parts.append(f"key_arguments={self.key_arguments!r}")
        if self.check_arguments:
            parts.append(f"check_arguments={self.check_arguments!r}")
        return f"IdempotencyPolicy({', '.join(parts)})"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool's body knows about the call it serves.

    Give a tool a parameter annotated ``ToolContext`` (any name) and the
    executor fills it in; it is not an argument, and the model never sees it.

    Attributes:
        tenant: The call's tenant.
        run_id: The call's run.
        call_id: The call's own id (not part of the key).
        tool: The tool's name.
        idempotency_key: The call's idempotency key, 64 lowercase hex digits:
            pass it to a downstream that takes an Idempotency-Key of its own.
            None where no key can be derived (a tool without a policy, a
            ``read_only`` tool, or a key argument the call did not send).
        attempt: Which attempt at the call this is, from 1: a ``read_only``
            or ``idempotent`` tool's failed attempt may be tried again, an
            ``effectful`` one's never. 0 when the request did not say.
        traceparent: The W3C trace context of the body's span, when the call
            carried one; None otherwise.
    """

    tenant: str
    run_id: str
    call_id: str
    tool: str
    idempotency_key: str | None = None
    attempt: int = 1
    traceparent: str | None = None


class Tool(Generic[P, R]):
    """A function declared as a tool by ``@tool``.

    Calling it calls the function, unchanged (an async function returns its
    coroutine). The declaration's parts are attributes; :meth:`declaration`
    gives them as the executors' catalog holds them.

    Attributes:
        fn: The function itself: the tool's body.
        name: The tool's name, a token of ``[A-Za-z0-9_-]{1,128}``.
        description: What the tool does, for people and models ("" for none).
        policy: The idempotency policy, or None (no kind: nothing is claimed
            or recorded).
        timeout: The bound on one attempt of the body in seconds, or None.
        context_parameter: The name of the parameter that receives the
            :class:`ToolContext`, or None.
        arguments: The names of the arguments, in the order of the signature
            (the context parameter is not one).
        required: The arguments without a default.
    """

    fn: Callable[P, R]
    # Set by functools.update_wrapper, from the function.
    __name__: str
    __qualname__: str
    __wrapped__: Callable[P, R]

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        policy: IdempotencyPolicy | None,
        timeout_ms: int | None,
        context_parameter: str | None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.description = description
        self.policy = policy
        self._parameters = parameters
        self._timeout_ms = timeout_ms
        self.context_parameter = context_parameter
        self.arguments: tuple[str, ...] = tuple(parameters.get("properties", {}))
        self.required: tuple[str, ...] = tuple(parameters.get("required", ()))
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        kind = self.policy.kind.value if self.policy else "no policy"
        return f"<Tool {self.name} ({kind})>"

    @property
    def is_async(self) -> bool:
        """Whether the body is a coroutine function."""
        return inspect.iscoroutinefunction(self.fn)

    @property
    def timeout(self) -> float | None:
        """The bound on one attempt of the body, in seconds; None for none."""
        return None if self._timeout_ms is None else self._timeout_ms / 1000

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of the arguments object (a copy)."""
        return copy.deepcopy(self._parameters)

    def declaration(self) -> dict[str, Any]:
        """The tool as the executors' catalog declares it (docs/PROTOCOL.md §8):
        ``name`` and ``parameters`` always; ``description`` when there is one;
        ``kind`` and, when they say something, ``key_arguments`` (absent: every
        argument; ``[]``: none) and ``check_arguments`` for a tool with a
        policy; ``timeout_ms`` for a tool with a timeout. A fresh dict, JSON as
        it is."""
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        d["parameters"] = self.parameters
        if self.policy is not None:
            d["kind"] = self.policy.kind.value
            if self.policy.key_arguments is not None:
                d["key_arguments"] = list(self.policy.key_arguments)
            if self.policy.check_arguments:
                d["check_arguments"] = list(self.policy.check_arguments)
        if self._timeout_ms is not None:
            d["timeout_ms"] = self._timeout_ms
        return d


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    idempotency: IdempotencyPolicy | Idempotency | None = None,
    name: str | None = None,
    description: str | None = None,
    timeout: float | datetime.timedelta | None = None,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    idempotency: IdempotencyPolicy | Idempotency | None = None,
    name: str | None = None,
    description: str | None = None,
    timeout: float | datetime.timedelta | None = None,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Declare a function (plain or async) as a tool: ``@tool``, ``@tool()`` or
    ``@tool(idempotency=..., name=..., description=..., timeout=...)``.

    Args:
        idempotency: What repeating the tool does: an
            :class:`IdempotencyPolicy`, or an :class:`Idempotency` alone for a
            policy whose key is every argument. None (the default) declares no
            policy.
        name: The tool's name; the function's name by default. It must be a
            token of ``[A-Za-z0-9_-]{1,128}`` (it is part of NATS subjects).
        description: What the tool does; the docstring's first paragraph by
            default.
        timeout: The bound on one attempt of the body, in seconds or as a
            timedelta, to the millisecond; None for no bound of its own.

    Returns:
        The :class:`Tool` (or, called with keywords only, the decorator that
        makes it).

    Raises:
        UnknownArgumentError: A key or check argument is not a parameter.
        DeclarationError: Any other part of the declaration cannot stand: a
            bad name or timeout, ``*args``, a parameter type with no JSON
            Schema, type hints that do not resolve.
        TypeError: Something that is not a function, or an argument of the
            wrong type.
    """
    policy = _policy(idempotency)
    timeout_ms = _timeout_ms(timeout)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name is a str, not {type(name).__qualname__}")
    if description is not None and not isinstance(description, str):
        raise TypeError(f"description is a str, not {type(description).__qualname__}")

    def decorate(f: Callable[P, R]) -> Tool[P, R]:
        return _declare(f, name=name, description=description, policy=policy, timeout_ms=timeout_ms)

    if fn is None:
        return decorate
    return decorate(fn)


def _policy(idempotency: object) -> IdempotencyPolicy | None:
    if idempotency is None or isinstance(idempotency, IdempotencyPolicy):
        return idempotency
    if isinstance(idempotency, Idempotency):
        return IdempotencyPolicy(idempotency)
    raise TypeError(
        f"idempotency is an IdempotencyPolicy (or an Idempotency), not "
        f"{type(idempotency).__qualname__}"
    )


def _timeout_ms(timeout: object) -> int | None:
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(
            f"timeout is in seconds (a number) or a timedelta, not {type(timeout).__qualname__}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise DeclarationError(
            f"must be a positive number of seconds, not {timeout!r}", field="timeout"
        )
    ms = round(seconds * 1000)
    if ms < 1:
        raise DeclarationError(f"{timeout!r} is less than a millisecond", field="timeout")
    return ms


def _declare(
    fn: Callable[P, R],
    *,
    name: str | None,
    description: str | None,
    policy: IdempotencyPolicy | None,
    timeout_ms: int | None,
) -> Tool[P, R]:
    if isinstance(fn, Tool):
        raise TypeError(f"{fn.name} is a tool already")
    if isinstance(fn, type) or not callable(fn):
        raise TypeError(f"@tool declares a function, not {fn!r}")
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if not _TOKEN.fullmatch(tool_name):
        raise DeclarationError(
            f"{tool_name!r} is not a token of [A-Za-z0-9_-]{{1,128}} (a tool's name is part of "
            "NATS subjects): pass name=...",
            tool=tool_name,
            field="name",
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TypeError(f"@tool cannot read the signature of {fn!r}: {e}") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:  # a forward reference that does not resolve, and the like
        raise DeclarationError(
            f"the type hints cannot be resolved: {e}", tool=tool_name, field="parameters"
        ) from None

    doc = _docstring.parse(inspect.getdoc(fn))
    builder = _schema.Builder(injected=(ToolContext,))
    properties: dict[str, Any] = {}
    required: list[str] = []
    context: str | None = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise DeclarationError(
                "a tool's arguments are named one by one: *args and **kwargs cannot be "
                "described to a model",
                tool=tool_name,
                field="parameters",
                argument=param.name,
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise DeclarationError(
                "is positional-only, but a tool's arguments arrive by name",
                tool=tool_name,
                field="parameters",
                argument=param.name,
            )
        hint = hints.get(param.name, Any)
        if _is_context(hint):
            if context is not None:
                raise DeclarationError(
                    f"a second ToolContext parameter (the first is {context!r})",
                    tool=tool_name,
                    field="parameters",
                    argument=param.name,
                )
            context = param.name
            continue
        try:
            prop = builder.schema(hint)
        except _schema.SchemaError as e:
            raise DeclarationError(
                f"has no JSON Schema: {e}", tool=tool_name, field="parameters", argument=param.name
            ) from None
        if param.name in doc.args:
            prop = {**prop, "description": doc.args[param.name]}
        if param.default is param.empty:
            required.append(param.name)
        else:
            ok, value = _schema.json_default(param.default)
            if ok:
                prop = {**prop, "default": value}
        properties[param.name] = prop

    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    parameters["additionalProperties"] = False
    if builder.defs:
        parameters["$defs"] = builder.defs

    if policy is not None:
        for field, names in (
            ("idempotency.key_arguments", policy.key_arguments or ()),
            ("idempotency.check_arguments", policy.check_arguments),
        ):
            for arg in names:
                if arg in properties:
                    continue
                if arg == context:
                    reason = (
                        "is the ToolContext parameter, which the executor fills in: no argument"
                    )
                else:
                    listed = ", ".join(properties) or "none"
                    reason = f"is not a parameter of the tool (parameters: {listed})"
                raise UnknownArgumentError(reason, tool=tool_name, field=field, argument=arg)

    return Tool(
        fn,
        name=tool_name,
        description=doc.summary if description is None else description,
        parameters=parameters,
        policy=policy,
        timeout_ms=timeout_ms,
        context_parameter=context,
    )


def _is_context(hint: Any) -> bool:
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint is ToolContext
