"""The vocabulary of answers and run events (docs/PROTOCOL.md §5).

Every call gets exactly one answer, of one of five kinds; a sixth kind,
``resolved``, is an audit event (an operator settled a key), never an answer.
:class:`RunEventKind` names them as a run's events are named
(``TOOL_DEDUPLICATED``, ``TOOL_INDETERMINATE`` …) and carries the wire kind as
its value, so ``RunEventKind("deduplicated") is RunEventKind.TOOL_DEDUPLICATED``.

:class:`IndeterminateReason`, :class:`RejectionCode` and :class:`FailureCode`
are the strings an ``indeterminate``, ``rejected`` or ``failed`` answer carries.
The values are the wire's; the Go package ``events`` defines the same ones.

:class:`RunEvent` is one answer or audit event as the client reads it, whichever
mode (structured or binary) it travelled in.
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "EVENT_TYPE_PREFIX",
    "FailureCode",
    "IndeterminateReason",
    "RejectionCode",
    "RunEvent",
    "RunEventKind",
]

#: The CloudEvents ``type`` of an event is this prefix and its wire kind.
EVENT_TYPE_PREFIX = "io.tesserix.toolexec."


class RunEventKind(enum.Enum):
    """What became of a tool call, as a run event; the value is the wire kind.

    The answer kinds, exactly one per call:

    * ``TOOL_COMPLETED`` (``completed``): the tool ran; its outcome is recorded.
    * ``TOOL_DEDUPLICATED`` (``deduplicated``): a recorded outcome of an earlier
      call with the same key answered this one; nothing ran.
    * ``TOOL_INDETERMINATE`` (``indeterminate``): nobody can say whether the
      effect landed (see :class:`IndeterminateReason`); the typed error is
      :class:`toolexec.IndeterminateOutcomeError`.
    * ``TOOL_FAILED`` (``failed``): the call failed and its effect is known not
      to have landed (see :class:`FailureCode`).
    * ``TOOL_REJECTED`` (``rejected``): the call was refused before anything
      happened (see :class:`RejectionCode`).

    And the audit kind, which answers no call:

    * ``TOOL_RESOLVED`` (``resolved``): an operator completed or released an
      indeterminate key.
    """

    TOOL_COMPLETED = "completed"
    TOOL_DEDUPLICATED = "deduplicated"
    TOOL_INDETERMINATE = "indeterminate"
    TOOL_FAILED = "failed"
    TOOL_REJECTED = "rejected"
    TOOL_RESOLVED = "resolved"

    @property
    def wire_kind(self) -> str:
        """The kind as the wire spells it: a subject token, the last part of the
        event's type."""
        return str(self.value)

    @property
    def event_type(self) -> str:
        """The CloudEvents ``type`` of events of this kind."""
        return EVENT_TYPE_PREFIX + self.wire_kind

    @property
    def is_answer(self) -> bool:
        """Whether events of this kind answer a call (all but TOOL_RESOLVED)."""
        return self is not RunEventKind.TOOL_RESOLVED

    @property
    def is_success(self) -> bool:
        """Whether the call has an outcome: completed or deduplicated."""
        return self in (RunEventKind.TOOL_COMPLETED, RunEventKind.TOOL_DEDUPLICATED)

    @classmethod
    def from_wire(cls, kind: str) -> RunEventKind:
        """The member for a wire kind; ValueError for a kind that is none."""
        try:
            return cls(kind)
        except ValueError:
            known = ", ".join(k.value for k in cls)
            raise ValueError(f"unknown event kind {kind!r} (known: {known})") from None

    @classmethod
    def answers(cls) -> tuple[RunEventKind, ...]:
        """The five kinds that answer a call, in the wire's order."""
        return tuple(k for k in cls if k.is_answer)


class IndeterminateReason(enum.StrEnum):
    """Why an answer is ``indeterminate`` (docs/PROTOCOL.md §5)."""

    #: An effectful tool failed after it started: its effect may have landed.
    BODY_FAILED = "body_failed"
    #: An effectful tool ran past its timeout.
    TIMEOUT = "timeout"
    #: The executor running the tool stopped renewing its claim before answering.
    HOLDER_LOST = "holder_lost"
    #: The store could not be reached, so the tool was not started (with
    #: body_entered false, nothing ran and a later retry is safe).
    STORE_UNAVAILABLE = "store_unavailable"
    #: A key argument was missing, so the tool did not run.
    KEY_UNDERIVABLE = "key_underivable"


class RejectionCode(enum.StrEnum):
    """Why a call was ``rejected`` (docs/PROTOCOL.md §5). All but
    ARGUMENTS_MISMATCH, TOOL_CONFLICT and UPSTREAM_UNAVAILABLE mean the call
    itself is at fault."""

    INVALID_JSON = "invalid_json"
    NOT_CLOUDEVENT = "not_cloudevent"
    BAD_SPECVERSION = "bad_specversion"
    BAD_TYPE = "bad_type"
    MISSING_ATTRIBUTE = "missing_attribute"
    BAD_TOKEN = "bad_token"
    TENANT_MISMATCH = "tenant_mismatch"
    TOOL_MISMATCH = "tool_mismatch"
    CALL_ID_MISMATCH = "call_id_mismatch"
    UNKNOWN_TOOL = "unknown_tool"
    #: Two workers declare the tool differently (or a worker and the
    #: executors' own declaration disagree); nothing ran.
    TOOL_CONFLICT = "tool_conflict"
    #: The MCP server the tool's body calls cannot be reached now; nothing
    #: ran, and the same call may be sent again once it is back.
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    SCHEMA_VIOLATION = "schema_violation"
    TOO_LARGE = "too_large"
    ARGUMENTS_NOT_OBJECT = "arguments_not_object"
    DUPLICATE_MEMBER = "duplicate_member"
    NFC_COLLISION = "nfc_collision"
    NUMBER_OUT_OF_RANGE = "number_out_of_range"
    INVALID_UNICODE = "invalid_unicode"
    TOO_DEEP = "too_deep"
    TOO_MANY_VALUES = "too_many_values"
    #: A duplicate of a recorded call changed one of the tool's check
    #: arguments; nothing ran.
    ARGUMENTS_MISMATCH = "arguments_mismatch"
    BAD_CONTENT_TYPE = "bad_content_type"
    BAD_DATA = "bad_data"


class FailureCode(enum.StrEnum):
    """Why a call ``failed`` (docs/PROTOCOL.md §5)."""

    #: The tool reported an error, after the retries it was allowed.
    TOOL_ERROR = "tool_error"
    #: The tool said its effect did not land; the key was freed.
    NO_EFFECT = "no_effect"
    #: A tool that is not effectful ran past its timeout.
    TIMEOUT = "timeout"
    #: The tool returned more than the executor records.
    OUTCOME_TOO_LARGE = "outcome_too_large"


_E = TypeVar("_E", bound=enum.StrEnum)


def coerce(kind: type[_E], value: str) -> _E | str:
    """value as a member of kind, or as the plain string it came as when this
    version does not know it (a newer executor's reason or code)."""
    try:
        return kind(value)
    except ValueError:
        return value


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEvent:
    """One answer to a call, or an audit event, as stored on
    ``TOOLEXEC_EVENTS`` (docs/PROTOCOL.md §5): what
    :meth:`toolexec.Client.watch` yields.

    The members a kind does not carry are None: ``outcome`` for the
    successes (and a resolution that completed a key), ``reason`` and
    ``body_entered`` for TOOL_INDETERMINATE, ``code`` for TOOL_FAILED and
    TOOL_REJECTED, ``action`` for TOOL_RESOLVED.

    Attributes:
        kind: What the event says happened.
        tenant: Whose call it answers.
        tool: The tool called (None for a rejected call that named none usable).
        run_id: The call's run (None when the call named no valid one).
        call_id: The call answered (for a resolution, the call that made the
            record, when it says).
        key: The idempotency key, when one was derived.
        outcome: The tool's outcome, for completed and deduplicated answers
            and a resolution that completed the key.
        error: What went wrong (failed, rejected), or detail for operators
            (indeterminate).
        code: A :class:`FailureCode` or :class:`RejectionCode`.
        field: The attribute or argument at fault, for some rejections.
        reason: An :class:`IndeterminateReason`.
        body_entered: Whether the tool's body was entered for this key
            (indeterminate answers only).
        action: ``complete`` or ``release`` (resolutions only).
        operator: Who settled the key, when known (resolutions only).
        time: When the answer was made (timezone-aware), when it says.
        id: The event's CloudEvents id: the same for every answer to one call.
        source: Who published it (``/toolexec/executor/<name>``).
        subject: The NATS subject it was published on, when known.
        seq: Its sequence in ``TOOLEXEC_EVENTS``, when it was read from there.
        traceparent: The call's W3C trace context, when it had one.
        tracestate: Its tracestate, when there is one.
    """

    kind: RunEventKind
    tenant: str
    tool: str | None = None
    run_id: str | None = None
    call_id: str | None = None
    key: str | None = None
    outcome: str | None = None
    error: str | None = None
    code: RejectionCode | FailureCode | str | None = None
    field: str | None = None
    reason: IndeterminateReason | str | None = None
    body_entered: bool | None = None
    action: str | None = None
    operator: str | None = None
    time: datetime.datetime | None = None
    id: str = ""
    source: str = ""
    subject: str | None = None
    seq: int | None = None
    traceparent: str | None = None
    tracestate: str | None = None
