"""The errors and the event vocabulary: the same strings as the Go side's
(read from its source), the seed's names for the answer kinds, and errors
that survive pickling."""

import pickle
import re

import pytest

from conftest import REPO
from toolexec import (
    ArgumentsNotObjectError,
    CallError,
    CallIDTakenError,
    DeclarationError,
    FailedError,
    FailureCode,
    IndeterminateOutcomeError,
    IndeterminateReason,
    InvalidArgumentsError,
    KeyErrorCode,
    KeyUnderivableError,
    NoAnswerError,
    RejectedError,
    RejectionCode,
    RunEventKind,
    ToolexecError,
    UnknownArgumentError,
    UnsupportedValueError,
)
from toolexec.events import EVENT_TYPE_PREFIX


def go_constants(rel: str, typ: str) -> list[str]:
    """The values of the Go constants of a type in a file: `Name Type = "value"`."""
    src = (REPO / rel).read_text()
    return re.findall(rf'^\s*\w+\s+{typ}\s*=\s*"([a-z_]+)"', src, re.MULTILINE)


def test_kinds_are_the_wires() -> None:
    assert go_constants("events/kind.go", "Kind") == [k.value for k in RunEventKind]
    assert RunEventKind("deduplicated") is RunEventKind.TOOL_DEDUPLICATED
    assert RunEventKind.from_wire("indeterminate") is RunEventKind.TOOL_INDETERMINATE
    assert RunEventKind.TOOL_DEDUPLICATED.wire_kind == "deduplicated"
    assert RunEventKind.TOOL_INDETERMINATE.event_type == "io.tesserix.toolexec.indeterminate"
    assert EVENT_TYPE_PREFIX == "io.tesserix.toolexec."
    assert [k.wire_kind for k in RunEventKind.answers()] == [
        "completed",
        "deduplicated",
        "indeterminate",
        "failed",
        "rejected",
    ]
    assert not RunEventKind.TOOL_RESOLVED.is_answer
    assert [k for k in RunEventKind if k.is_success] == [
        RunEventKind.TOOL_COMPLETED,
        RunEventKind.TOOL_DEDUPLICATED,
    ]
    with pytest.raises(ValueError, match="unknown event kind 'done'"):
        RunEventKind.from_wire("done")


def test_the_protocol_names_the_seeds_kinds() -> None:
    protocol = (REPO / "docs" / "PROTOCOL.md").read_text()
    assert "`TOOL_DEDUPLICATED` is `deduplicated`" in protocol
    assert "`TOOL_INDETERMINATE` is\n`indeterminate`" in protocol


def test_reasons_and_codes_are_the_wires() -> None:
    assert set(go_constants("events/kind.go", "Reason")) == set(IndeterminateReason)
    go_codes = go_constants("events/kind.go", "Code")
    assert set(go_codes) == set(RejectionCode) | set(FailureCode)
    # The failure codes come last in the Go file, after the rejection codes.
    assert go_codes[-len(FailureCode) :] == [c.value for c in FailureCode]
    assert go_codes[: len(RejectionCode)] == [c.value for c in RejectionCode]


def test_key_error_codes_are_the_go_sides() -> None:
    canonical = re.findall(
        r'Code\w+\s*=\s*"([a-z_]+)"', (REPO / "idemkey/canonical/errors.go").read_text()
    )
    idemkey = re.findall(r'Code\w+\s*=\s*"([a-z_]+)"', (REPO / "idemkey/errors.go").read_text())
    assert set(canonical) | set(idemkey) == set(KeyErrorCode)
    # Each is also a rejection code: what an executor answers for such a call,
    # but for key_underivable, which makes an indeterminate answer instead.
    assert set(KeyErrorCode) - set(RejectionCode) == {KeyErrorCode.KEY_UNDERIVABLE}
    assert KeyErrorCode.KEY_UNDERIVABLE.value == IndeterminateReason.KEY_UNDERIVABLE.value


ERRORS: list[ToolexecError] = [
    DeclarationError("is bad", tool="t", field="name"),
    UnknownArgumentError("is not a parameter", tool="t", field="k", argument="a"),
    InvalidArgumentsError(KeyErrorCode.TOO_DEEP, "too deep", offset=3),
    UnsupportedValueError(KeyErrorCode.INVALID_JSON, "no JSON form", path="arguments['x']"),
    ArgumentsNotObjectError("an array"),
    KeyUnderivableError("flight"),
    IndeterminateOutcomeError(tool="book", key="ab12", reason="body_failed", body_entered=True),
    FailedError(tool="book", code="tool_error", message="airline said no"),
    RejectedError(
        tool="book", code="schema_violation", message="seats: want integer", field="seats"
    ),
    CallIDTakenError(tenant="acme", tool="book", call_id="call_1"),
    NoAnswerError(tenant="acme", tool="book", run_id="run_1", call_id="call_1"),
]


@pytest.mark.parametrize("err", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_pickle(err: ToolexecError) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert vars(back) == vars(err)


def test_error_families() -> None:
    for err in ERRORS[:6]:
        assert isinstance(err, ValueError)
    for err in ERRORS[6:]:
        assert isinstance(err, CallError)
        assert not isinstance(err, ValueError)


def test_indeterminate_outcome() -> None:
    err = IndeterminateOutcomeError(
        tool="book", key="ab12", reason="timeout", body_entered=False, detail="30s passed"
    )
    assert err.reason is IndeterminateReason.TIMEOUT
    assert str(err) == (
        "outcome of tool 'book' is indeterminate (timeout, body entered: no), key ab12: 30s passed"
    )
    underivable = IndeterminateOutcomeError(
        tool="book", key=None, reason=IndeterminateReason.KEY_UNDERIVABLE, body_entered=False
    )
    assert underivable.key is None
    # A reason from a newer executor stays the string it came as.
    newer = IndeterminateOutcomeError(tool="t", key="k", reason="moon_phase", body_entered=True)
    assert newer.reason == "moon_phase"
    assert not isinstance(newer.reason, IndeterminateReason)


def test_failed_and_rejected() -> None:
    failed = FailedError(tool="book", code="no_effect", message="refused before acting")
    assert failed.code is FailureCode.NO_EFFECT
    assert "failed (no_effect)" in str(failed)
    rejected = RejectedError(tool=None, code="bad_token", message="tenant 'a b'", field="tenant")
    assert rejected.code is RejectionCode.BAD_TOKEN
    assert str(rejected) == "call rejected (bad_token at tenant): tenant 'a b'"
    assert RejectedError(tool="t", code="new_code", message="m").code == "new_code"


def test_call_errors_name_the_call() -> None:
    taken = CallIDTakenError(tenant="acme", tool="book", call_id="call_1")
    assert (taken.tenant, taken.tool, taken.call_id) == ("acme", "book", "call_1")
    assert "'call_1'" in str(taken)
    none = NoAnswerError(tenant="acme", tool="book", run_id="run_1", call_id="call_1")
    assert str(none) == "no answer yet to call call_1 (tenant acme, tool book, run run_1)"
