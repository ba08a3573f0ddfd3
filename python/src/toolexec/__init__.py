"""toolexec for Python: tools declared with what repeating them does, and the
idempotency keys the executors derive.

The executors are Go programs that run tool calls from NATS JetStream with at
most one side effect per idempotency key (docs/PROTOCOL.md is their wire).
This package is their face in Python:

* :mod:`toolexec.tools`: :func:`tool`, :class:`Idempotency`,
  :class:`IdempotencyPolicy`, :class:`ToolContext`; a tool's
  :meth:`~Tool.declaration` is its entry in the executors' catalog.
* :mod:`toolexec.keys`: :func:`idempotency_key` and :func:`canonical`, the
  derivation of docs/PROTOCOL.md §6, byte for byte the Go side's.
* :mod:`toolexec.errors` and :mod:`toolexec.events`: the errors a call ends in
  and the kinds of its answers.

Every public name is importable from here.
"""

from ._version import __version__
from .errors import (
    ArgumentsNotObjectError,
    CallError,
    CallIDTakenError,
    DeclarationError,
    FailedError,
    IndeterminateOutcomeError,
    InvalidArgumentsError,
    KeyDerivationError,
    KeyErrorCode,
    KeyUnderivableError,
    NoAnswerError,
    RejectedError,
    ToolexecError,
    UnknownArgumentError,
    UnsupportedValueError,
)
from .events import FailureCode, IndeterminateReason, RejectionCode, RunEventKind
from .keys import Arguments, canonical, idempotency_key
from .tools import Idempotency, IdempotencyPolicy, Tool, ToolContext, tool

__all__ = [
    "Arguments",
    "ArgumentsNotObjectError",
    "CallError",
    "CallIDTakenError",
    "DeclarationError",
    "FailedError",
    "FailureCode",
    "Idempotency",
    "IdempotencyPolicy",
    "IndeterminateOutcomeError",
    "IndeterminateReason",
    "InvalidArgumentsError",
    "KeyDerivationError",
    "KeyErrorCode",
    "KeyUnderivableError",
    "NoAnswerError",
    "RejectedError",
    "RejectionCode",
    "RunEventKind",
    "Tool",
    "ToolContext",
    "ToolexecError",
    "UnknownArgumentError",
    "UnsupportedValueError",
    "__version__",
    "canonical",
    "idempotency_key",
    "tool",
]
