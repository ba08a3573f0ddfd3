"""The exceptions of toolexec.

Three families, all below :class:`ToolexecError`:

* Declaring a tool: :class:`DeclarationError` (a :class:`ValueError`), and
  :class:`UnknownArgumentError` for a key or check argument that is not a
  parameter of the tool. Raised when ``@tool`` runs, never later.
* Deriving a key: :class:`KeyDerivationError` (a :class:`ValueError`) with a
  ``code`` that is one of :class:`KeyErrorCode`, the same stable strings the Go
  side reports (``idemkey.Code``) and rejection events carry.
* The end of a call, for :class:`toolexec.Client`: the answer kinds that are
  not a success become :class:`IndeterminateOutcomeError`,
  :class:`FailedError` and :class:`RejectedError`; a call that could not be
  published under its id is :class:`CallIDTakenError`, and one whose answer did
  not come in time :class:`NoAnswerError`. They mirror the Go package's errors
  of the same names (docs/PROTOCOL.md §5). A call that no stream would store is
  :class:`NoStreamError` (no executor's stream takes the tenant's calls) or
  :class:`OldExecutorsError` (the executors speak wire version 1, §11); another
  refusal by JetStream is a :class:`JetStreamError`, all of them
  :class:`CallError`.
* Serving a tool: :class:`NoEffect`, which a tool's body raises (it is not
  a :class:`ToolexecError`: toolexec does not raise it, the body does) to say
  that its effect did not land; :class:`toolexec.Worker` replies ``no_effect``
  for it, and the executor frees the key.
* Reaching the executors' services: :class:`NoHistoryServiceError`,
  :class:`NoCatalogServiceError`, and the refusals :class:`HistoryError` and
  :class:`CatalogError` they answer with (docs/PROTOCOL.md §7, §8);
  :class:`MalformedAnswerError` for a message on an answer subject that is not
  a toolexec answer. All are :class:`ServiceError`.

Every exception here pickles and unpickles to an equal one (attributes
included), so that it can cross a process boundary.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, TypeVar

from .events import FailureCode, IndeterminateReason, RejectionCode

if TYPE_CHECKING:
    from .events import RunEvent

__all__ = [
    "ArgumentsNotObjectError",
    "CallError",
    "CallIDTakenError",
    "CatalogError",
    "DeclarationError",
    "FailedError",
    "HistoryError",
    "IndeterminateOutcomeError",
    "InvalidArgumentsError",
    "JetStreamError",
    "KeyDerivationError",
    "KeyErrorCode",
    "KeyUnderivableError",
    "MalformedAnswerError",
    "NoAnswerError",
    "NoCatalogServiceError",
    "NoEffect",
    "NoHistoryServiceError",
    "NoStreamError",
    "OldExecutorsError",
    "RejectedError",
    "ServiceError",
    "ToolexecError",
    "UnknownArgumentError",
    "UnsupportedValueError",
]


def _rebuild(cls: type[ToolexecError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class ToolexecError(Exception):
    """Base of every exception toolexec raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The subclasses take keyword arguments that are not their args: rebuild
        # from the message and the attributes instead of calling the constructor.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


# --- declaring tools ---------------------------------------------------------


class DeclarationError(ToolexecError, ValueError):
    """A tool declaration that cannot stand, refused when ``@tool`` runs.

    Attributes:
        tool: The tool's name as declared (None when the name itself is at fault
            before one could be read).
        field: The part of the declaration at fault: ``name``, ``timeout``,
            ``parameters``, ``idempotency.key_arguments`` …
        argument: The offending parameter or argument name, when there is one.
        reason: What is wrong, for people.
    """

    def __init__(
        self, reason: str, *, tool: str | None = None, field: str, argument: str | None = None
    ) -> None:
        self.tool = tool
        self.field = field
        self.argument = argument
        self.reason = reason
        where = f"tool {tool!r}: " if tool is not None else ""
        what = f"{field}: {argument!r} " if argument is not None else f"{field}: "
        super().__init__(f"{where}{what}{reason}")


class UnknownArgumentError(DeclarationError):
    """A key or check argument that is not a parameter of the tool.

    ``argument`` names it; the message lists the parameters there are.
    """


# --- deriving keys ------------------------------------------------------------


class KeyErrorCode(enum.StrEnum):
    """Why no key could be derived: the codes of docs/PROTOCOL.md §6.

    Each value is the string the Go side's ``idemkey.Code`` returns and a
    rejection event carries, so ``err.code == "duplicate_member"`` holds.
    """

    #: The arguments are not one well-formed JSON value (or, given as Python
    #: objects, hold a value that has no JSON form).
    INVALID_JSON = "invalid_json"
    #: An object names the same member twice.
    DUPLICATE_MEMBER = "duplicate_member"
    #: Two member names of one object are equal after NFC.
    NFC_COLLISION = "nfc_collision"
    #: A number beyond the doubles, or a non-zero one that rounds to zero (and,
    #: from Python, NaN and the infinities).
    NUMBER_OUT_OF_RANGE = "number_out_of_range"
    #: Invalid UTF-8, or a lone surrogate.
    INVALID_UNICODE = "invalid_unicode"
    #: Containers nest deeper than the arguments may (127 levels, the arguments
    #: object included).
    TOO_DEEP = "too_deep"
    #: More members in an object, elements in an array or values in all than
    #: the bounds allow (1,000, 10,000 and 20,000).
    TOO_MANY_VALUES = "too_many_values"
    #: Valid JSON, but not an object.
    ARGUMENTS_NOT_OBJECT = "arguments_not_object"
    #: A key argument the call did not send at all (null counts as sent).
    KEY_UNDERIVABLE = "key_underivable"


class KeyDerivationError(ToolexecError, ValueError):
    """No idempotency key can be derived from these inputs.

    Attributes:
        code: One of :class:`KeyErrorCode`.
        reason: What is wrong, for people.
    """

    code: KeyErrorCode

    def __init__(self, code: KeyErrorCode, reason: str, *, where: str = "") -> None:
        self.code = code
        self.reason = reason
        super().__init__(f"no idempotency key ({code.value}){where}: {reason}")


class InvalidArgumentsError(KeyDerivationError):
    """Arguments (or a tenant, run id or tool name) that have no canonical form.

    Attributes:
        offset: For arguments given as JSON text, the byte offset in its UTF-8
            where the problem was found (as the Go side reports it); None
            otherwise.
        path: For arguments given as Python objects, where the value sits, such
            as ``arguments['legs'][2]``; for a tenant, run id or tool, its
            name; None for JSON text.
    """

    def __init__(
        self,
        code: KeyErrorCode,
        reason: str,
        *,
        offset: int | None = None,
        path: str | None = None,
    ) -> None:
        self.offset = offset
        self.path = path
        where = ""
        if offset is not None:
            where = f" at byte {offset}"
        elif path is not None:
            where = f" at {path}"
        super().__init__(code, reason, where=where)


class UnsupportedValueError(InvalidArgumentsError, TypeError):
    """A Python value in the arguments that has no JSON form (a set, bytes, a
    date, an object): code ``invalid_json``. It is a :class:`TypeError` too."""


class ArgumentsNotObjectError(KeyDerivationError):
    """The arguments are well-formed JSON but not an object (code
    ``arguments_not_object``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(KeyErrorCode.ARGUMENTS_NOT_OBJECT, reason)


class KeyUnderivableError(KeyDerivationError):
    """A key argument is absent from the call (code ``key_underivable``).

    Attributes:
        argument: The first key argument found missing.
    """

    def __init__(self, argument: str) -> None:
        self.argument = argument
        super().__init__(
            KeyErrorCode.KEY_UNDERIVABLE,
            f"key argument {argument!r} is absent from the call (an argument sent as null "
            "is present)",
        )


# --- the end of a call ---------------------------------------------------------


_E = TypeVar("_E", bound=enum.StrEnum)


def _coerce(kind: type[_E], value: _E | str) -> _E | str:
    # A newer executor may send a reason or code this version does not know:
    # keep it as the string it came as rather than refuse the answer.
    try:
        return kind(value)
    except ValueError:
        return str(value)


class CallError(ToolexecError):
    """Base of the errors a call ends in, when it does not end in an outcome."""


class IndeterminateOutcomeError(CallError):
    """Nobody can say whether the call's effect landed, and running the tool
    again will not find out: the answer ``indeterminate``, the seed's
    ``TOOL_INDETERMINATE``.

    The run should stop here; an operator (or an approval path) settles the
    key, completing it with the outcome it finds or releasing it
    (docs/PROTOCOL.md §9). Retries of the same key get this same answer.

    Attributes:
        tool: The tool called.
        key: The idempotency key, or None when none could be derived (reason
            ``key_underivable``).
        reason: Why the outcome is unknown: an :class:`IndeterminateReason` (a
            reason this version does not know stays a plain string).
        body_entered: Whether the tool's body was entered for this key, by
            this call or an earlier one; False means the effect certainly did
            not happen through toolexec.
        detail: What the executor said beside, for operators, when it said
            something.
        event: The answer itself (its call id, run, time …) when the error
            comes from one, as :class:`toolexec.Client` raises it; else None.
    """

    def __init__(
        self,
        *,
        tool: str,
        key: str | None,
        reason: IndeterminateReason | str,
        body_entered: bool,
        detail: str | None = None,
        event: RunEvent | None = None,
    ) -> None:
        self.tool = tool
        self.key = key
        self.reason = _coerce(IndeterminateReason, reason)
        self.body_entered = body_entered
        self.detail = detail
        self.event = event
        msg = (
            f"outcome of tool {tool!r} is indeterminate ({self.reason}, body entered: "
            f"{'yes' if body_entered else 'no'})"
        )
        if key:
            msg += f", key {key}"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)


class FailedError(CallError):
    """The call failed, and it is known that its effect did not land: the
    answer ``failed``.

    Attributes:
        tool: The tool called.
        code: A :class:`FailureCode` (a code this version does not know stays a
            plain string).
        message: The executor's explanation.
        event: The answer itself when the error comes from one; else None.
    """

    def __init__(
        self,
        *,
        tool: str,
        code: FailureCode | str,
        message: str,
        event: RunEvent | None = None,
    ) -> None:
        self.tool = tool
        self.code = _coerce(FailureCode, code)
        self.message = message
        self.event = event
        super().__init__(f"tool {tool!r} failed ({self.code}): {message}")


class RejectedError(CallError):
    """The call was refused before anything happened (no claim, no record, no
    run): the answer ``rejected``. Sending it again unchanged gets the same
    answer, except for ``arguments_mismatch``.

    Attributes:
        tool: The tool named, or None when the call named none that could be read.
        code: A :class:`RejectionCode` (a code this version does not know stays
            a plain string).
        message: The executor's explanation.
        field: The attribute or argument at fault, when one is.
        event: The answer itself when an executor rejected the call; None when
            the client refused it before anything was sent (a bad token,
            arguments that are not a JSON object).
    """

    def __init__(
        self,
        *,
        tool: str | None,
        code: RejectionCode | str,
        message: str,
        field: str | None = None,
        event: RunEvent | None = None,
    ) -> None:
        self.tool = tool
        self.code = _coerce(RejectionCode, code)
        self.message = message
        self.field = field
        self.event = event
        what = f"call to tool {tool!r}" if tool else "call"
        at = f" at {field}" if field else ""
        super().__init__(f"{what} rejected ({self.code}{at}): {message}")


class CallIDTakenError(CallError):
    """A call was not stored because another call of the same tenant, tool and
    call id, which this client did not publish, waits to be answered. Use a
    fresh call id; no other tenant's call is ever in the way.

    Attributes:
        tenant: The call's tenant.
        tool: The call's tool.
        call_id: The id that is taken.
    """

    def __init__(self, *, tenant: str, tool: str, call_id: str) -> None:
        self.tenant = tenant
        self.tool = tool
        self.call_id = call_id
        super().__init__(
            f"call id {call_id!r} of tenant {tenant} and tool {tool} is held by a call not "
            "yet answered that this client did not publish: the call was not stored"
        )


class NoAnswerError(CallError):
    """The wait ended before the call's answer came. The call may still run
    and be answered: its tenant, tool and call id find the answer later.

    Attributes:
        tenant: The call's tenant.
        tool: The call's tool.
        run_id: The call's run.
        call_id: The call's id.
    """

    def __init__(self, *, tenant: str, tool: str, run_id: str, call_id: str) -> None:
        self.tenant = tenant
        self.tool = tool
        self.run_id = run_id
        self.call_id = call_id
        super().__init__(
            f"no answer yet to call {call_id} (tenant {tenant}, tool {tool}, run {run_id})"
        )


class NoStreamError(CallError):
    """No stream took the call: JetStream had no responder for its subject,
    and this client has never stored a call of the tenant (after it has, the
    same silence is a stream electing a leader, and the client keeps trying
    until the call's timeout). Nothing was stored.

    Either no executor has ever run against this NATS server to create the
    streams, the connection reaches another server than the executors', or
    its account does not import ``toolexec.call.<tenant>.>``.

    Attributes:
        tenant: The call's tenant.
        subject: The subject the call was published on.
    """

    def __init__(self, *, tenant: str, subject: str) -> None:
        self.tenant = tenant
        self.subject = subject
        super().__init__(
            f"no stream takes tenant {tenant}'s calls ({subject} has no responders): no "
            "executor has run against this NATS server to create the streams, the connection "
            "reaches another server than the executors', or its account does not import "
            f"toolexec.call.{tenant}.>"
        )


class OldExecutorsError(CallError):
    """The call was refused at once because the executors speak wire version
    1: their calls stream, ``TOOLEXEC_CALLS``, takes the call's subject instead
    of ``TOOLEXEC_CALLS_V2`` (JetStream error 10060). Nothing was stored;
    upgrade the executors before their callers (docs/PROTOCOL.md §11).

    Attributes:
        subject: The subject the call was published on.
        description: JetStream's own words.
    """

    def __init__(self, *, subject: str, description: str = "") -> None:
        self.subject = subject
        self.description = description
        super().__init__(
            f"a stream other than TOOLEXEC_CALLS_V2 (TOOLEXEC_CALLS, of wire version 1, where "
            f"the executors are older) took {subject}: upgrade the executors before their "
            "callers (docs/PROTOCOL.md §11)"
        )


class JetStreamError(CallError):
    """JetStream refused a request for a reason the client does not handle
    itself: a publication it would not store (a stream full, say), or a read
    of the events stream that failed.

    Attributes:
        code: The HTTP-like status JetStream gave (503, 404 …).
        err_code: JetStream's own error code (10077 …), 0 when it gave none.
        description: JetStream's description.
        subject: The subject of the request.
    """

    def __init__(self, *, code: int, err_code: int, description: str, subject: str) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        self.subject = subject
        super().__init__(f"JetStream refused {subject}: {description} ({code}, error {err_code})")


# --- serving a tool --------------------------------------------------------------


class NoEffect(Exception):  # noqa: N818  # it says what happened, as Go's tool.NoEffect does
    """Raised by a tool's body: the effect did not land, so calling the tool
    again with the same key is safe (the downstream refused before acting, the
    arguments did not decode, nothing was sent).

    A body served by :class:`toolexec.Worker` that raises it gets the error
    reply ``no_effect``: the executor frees the call's key and answers the
    call ``failed`` with the code ``no_effect``, even for an ``effectful``
    tool, and the next call with the key runs the body again. Raise it only
    when you know: any other exception leaves an ``effectful`` call
    ``indeterminate``, which is the honest answer when the effect may have
    landed.

    Args:
        cause: Why: the exception that said so (it becomes ``__cause__``), or
            a message.

    Attributes:
        cause: The exception or message given.
    """

    def __init__(self, cause: BaseException | str) -> None:
        if not isinstance(cause, (BaseException, str)):
            raise TypeError(f"cause is an exception or a str, not {type(cause).__qualname__}")
        super().__init__(cause)
        self.cause = cause
        if isinstance(cause, BaseException):
            self.__cause__ = cause

    def __str__(self) -> str:
        if isinstance(self.cause, str):
            return self.cause
        return str(self.cause) or type(self.cause).__qualname__


# --- the executors' services ----------------------------------------------------


class ServiceError(ToolexecError):
    """Base of the errors of the executors' services (history, catalog) and of
    answers that cannot be read."""


class NoHistoryServiceError(ServiceError):
    """The account has no JetStream to read the events stream with, and
    nothing answers its history requests (``toolexec.history.<tenant>``, then
    the operators' ``toolexec.admin.history``): no executor runs, or the
    account imports neither subject (a tenant reading another tenant's, or
    every tenant's, events).

    Attributes:
        subjects: The subjects asked, in order.
    """

    def __init__(self, *, subjects: tuple[str, ...]) -> None:
        self.subjects = subjects
        super().__init__(f"no executor answers history requests on {' or '.join(subjects)}")


class NoCatalogServiceError(ServiceError):
    """Nothing answers catalog requests on ``toolexec.tools.<tenant>``: no
    executor runs, or the account does not import the subject.

    Attributes:
        subject: The subject asked.
    """

    def __init__(self, *, subject: str) -> None:
        self.subject = subject
        super().__init__(f"no executor answers catalog requests on {subject}")


class HistoryError(ServiceError):
    """The history service refused a request (docs/PROTOCOL.md §7).

    Attributes:
        code: ``bad_request``, ``forbidden`` or ``unavailable`` (a code this
            version does not know stays as it came).
        message: The service's explanation.
    """

    def __init__(self, *, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"history request refused ({code}): {message}")


class CatalogError(ServiceError):
    """The catalog service refused a request (docs/PROTOCOL.md §8).

    Attributes:
        code: ``bad_request`` or ``too_large``.
        message: The service's explanation.
    """

    def __init__(self, *, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"catalog request refused ({code}): {message}")


class MalformedAnswerError(ServiceError):
    """A message on an answer subject, or a stored event, that is not a
    well-formed toolexec answer (docs/PROTOCOL.md §5).

    Attributes:
        reason: What is wrong with it.
        subject: Its NATS subject, when known.
    """

    def __init__(self, reason: str, *, subject: str | None = None) -> None:
        self.reason = reason
        self.subject = subject
        where = f" on {subject}" if subject else ""
        super().__init__(f"not a toolexec answer{where}: {reason}")
