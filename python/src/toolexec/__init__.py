"""toolexec for Python: tools declared with what repeating them does, the
idempotency keys the executors derive, and a client that calls the tools.

The executors are Go programs that run tool calls from NATS JetStream with at
most one side effect per idempotency key (docs/PROTOCOL.md is their wire).
This package is their face in Python:

* :mod:`toolexec.tools`: :func:`tool`, :class:`Idempotency`,
  :class:`IdempotencyPolicy`, :class:`ToolContext`; a tool's
  :meth:`~Tool.declaration` is its entry in the executors' catalog.
* :mod:`toolexec.keys`: :func:`idempotency_key` and :func:`canonical`, the
  derivation of docs/PROTOCOL.md §6, byte for byte the Go side's.
* :mod:`toolexec.client`: :class:`Client`, which calls tools through the
  executors over NATS (``call``, ``attach``, ``watch``, ``tools``) and returns
  a :class:`CallResult` or raises what the answer says.
* :mod:`toolexec.worker`: :class:`Worker` and :func:`serve`, which serve
  the tools' bodies to the executors over NATS (docs/PROTOCOL.md §12); a body
  raises :class:`NoEffect` to say that its effect did not land.
* :mod:`toolexec.errors` and :mod:`toolexec.events`: the errors a call ends in,
  the kinds of its answers, and :class:`RunEvent`, an answer as it is read.

Every public name is importable from here.
"""

from ._version import __version__
from .client import CallResult, Client, HistoryPath, ToolDeclaration, Watch
from .errors import (
    ArgumentsNotObjectError,
    CallError,
    CallIDTakenError,
    CatalogError,
    DeclarationError,
    FailedError,
    HistoryError,
    IndeterminateOutcomeError,
    InvalidArgumentsError,
    JetStreamError,
    KeyDerivationError,
    KeyErrorCode,
    KeyUnderivableError,
    MalformedAnswerError,
    NoAnswerError,
    NoCatalogServiceError,
    NoEffect,
    NoHistoryServiceError,
    NoStreamError,
    OldExecutorsError,
    RejectedError,
    ServiceError,
    ToolexecError,
    UnknownArgumentError,
    UnsupportedValueError,
)
from .events import FailureCode, IndeterminateReason, RejectionCode, RunEvent, RunEventKind
from .keys import Arguments, canonical, idempotency_key
from .tools import Idempotency, IdempotencyPolicy, Tool, ToolContext, tool
from .worker import Worker, serve

__all__ = [
    "Arguments",
    "ArgumentsNotObjectError",
    "CallError",
    "CallIDTakenError",
    "CallResult",
    "CatalogError",
    "Client",
    "DeclarationError",
    "FailedError",
    "FailureCode",
    "HistoryError",
    "HistoryPath",
    "Idempotency",
    "IdempotencyPolicy",
    "IndeterminateOutcomeError",
    "IndeterminateReason",
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
    "RejectionCode",
    "RunEvent",
    "RunEventKind",
    "ServiceError",
    "Tool",
    "ToolContext",
    "ToolDeclaration",
    "ToolexecError",
    "UnknownArgumentError",
    "UnsupportedValueError",
    "Watch",
    "Worker",
    "__version__",
    "canonical",
    "idempotency_key",
    "serve",
    "tool",
]
