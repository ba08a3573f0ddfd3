"""The wire of docs/PROTOCOL.md, version 2, for the client: subjects and
headers, a call written as a structured CloudEvent (§4), and answers read in
either mode (§4, §5), from a live message, a JetStream message get or the
history service (§7).

Nothing here does I/O; :mod:`toolexec.client` does.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
import math
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from .errors import MalformedAnswerError, RejectedError
from .events import (
    EVENT_TYPE_PREFIX,
    FailureCode,
    IndeterminateReason,
    RejectionCode,
    RunEvent,
    RunEventKind,
    coerce,
)

# --- names (§2, §3) -----------------------------------------------------------------

CALL_STREAM: Final = "TOOLEXEC_CALLS_V2"
EVENT_STREAM: Final = "TOOLEXEC_EVENTS"
CALL_PREFIX: Final = "toolexec.call."
EVENT_PREFIX: Final = "toolexec.event."
HISTORY_PREFIX: Final = "toolexec.history."
ADMIN_HISTORY_SUBJECT: Final = "toolexec.admin.history"
CATALOG_PREFIX: Final = "toolexec.tools."
CALL_TYPE: Final = EVENT_TYPE_PREFIX + "call"

#: The media type of a structured-mode message.
STRUCTURED_JSON: Final = "application/cloudevents+json"
JSON_MEDIA: Final = "application/json"
#: JetStream's header naming the stream a publication must land in.
EXPECTED_STREAM_HEADER: Final = "Nats-Expected-Stream"
#: The header marking a publication that may repeat an earlier one (§4).
REPEAT_HEADER: Final = "Toolexec-Repeat"
TRACEPARENT_HEADER: Final = "traceparent"
#: Where a JetStream request goes for one message of the events stream.
MSG_GET_SUBJECT: Final = "$JS.API.STREAM.MSG.GET." + EVENT_STREAM

# --- tool bodies served by workers (§12) -------------------------------------------

#: A tool's body requests go to BODY_PREFIX + <tool>, in the queue group BODY_QUEUE.
BODY_PREFIX: Final = "toolexec.body."
BODY_QUEUE: Final = "toolexec.body"
#: The endpoint metadata holding a tool's declaration.
DECLARATION_METADATA: Final = "toolexec.declaration"
#: The headers of a body request (the HTTP tool's too): the call's key,
#: tenant, run, call id, tool and attempt, and its trace context.
KEY_HEADER: Final = "Idempotency-Key"
TENANT_HEADER: Final = "Toolexec-Tenant"
RUN_HEADER: Final = "Toolexec-Run-Id"
CALL_HEADER: Final = "Toolexec-Call-Id"
TOOL_HEADER: Final = "Toolexec-Tool"
ATTEMPT_HEADER: Final = "Toolexec-Attempt"

#: JetStream's error codes the client tells apart.
ERR_STORE_FAILED: Final = 10077  # "maximum messages per subject exceeded", among others
ERR_STREAM_NOT_MATCH: Final = 10060  # "expected stream does not match"
ERR_NO_MESSAGE: Final = 10037  # "no message found"
ERR_JETSTREAM_NOT_ENABLED_FOR_ACCOUNT: Final = 10039
ERR_JETSTREAM_NOT_ENABLED: Final = 10076

MAX_TOKEN_LEN: Final = 128
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")
_KEY = re.compile(r"[0-9a-f]{64}")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def valid_token(value: object) -> bool:
    """Whether value can be a tenant, tool, run id or call id (§2)."""
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


def new_id(prefix: str) -> str:
    """prefix and 32 hex digits of randomness: 128 bits nobody can guess."""
    return prefix + secrets.token_hex(16)


def call_subject(tenant: str, tool: str, call_id: str) -> str:
    return f"{CALL_PREFIX}{tenant}.{tool}.{call_id}"


def event_subject(tenant: str, kind: str, tool: str, run_id: str, call_id: str) -> str:
    return f"{EVENT_PREFIX}{tenant}.{kind}.{tool}.{run_id}.{call_id}"


def answer_filter(tenant: str, tool: str, run_id: str, call_id: str) -> str:
    """One call's answer, whatever its kind; run_id may be ``*`` (any run)."""
    return event_subject(tenant, "*", tool, run_id, call_id)


def history_subject(tenant: str) -> str:
    return HISTORY_PREFIX + tenant


def catalog_subject(tenant: str) -> str:
    return CATALOG_PREFIX + tenant


def filter_fault(subject_filter: str) -> str | None:
    """What makes subject_filter not a well-formed subject filter, or None."""
    tokens = subject_filter.split(".")
    for i, tok in enumerate(tokens):
        if tok == "":
            return "has an empty token"
        if any(c in tok for c in " \t\r\n"):
            return "holds white space"
        if tok not in ("*", ">") and ("*" in tok or ">" in tok):
            return "has a wildcard inside a token"
        if tok == ">" and i != len(tokens) - 1:
            return "has '>' before its last token"
    return None


def filter_tenant(subject_filter: str) -> str | None:
    """The tenant an event filter names, or None when its tenant token is a
    wildcard (every tenant's events, which only the operators' history serves)."""
    tenant = subject_filter[len(EVENT_PREFIX) :].split(".", 1)[0]
    return None if tenant in ("*", ">") else tenant


# --- a call (§4) ------------------------------------------------------------------


def check_tokens(tenant: str, tool: str, run_id: str, call_id: str) -> None:
    """Refuses a call with a token that is not valid, as an executor would
    (``bad_token``), naming the attribute it travels in."""
    for field, value in (("tenant", tenant), ("runid", run_id), ("id", call_id), ("subject", tool)):
        if not valid_token(value):
            raise RejectedError(
                tool=tool if valid_token(tool) else None,
                code=RejectionCode.BAD_TOKEN,
                field=field,
                message=(
                    f"{value!r} is not a valid token: must be 1 to {MAX_TOKEN_LEN} characters "
                    "of A-Z a-z 0-9 _ -"
                ),
            )


def _refuse(tool: str, code: RejectionCode, message: str) -> RejectedError:
    return RejectedError(tool=tool, code=code, field="arguments", message=message)


def encode_arguments(arguments: object, tool: str) -> bytes:
    """The JSON text of a call's arguments: JSON text (str or UTF-8 bytes) is
    sent byte for byte once known to be one JSON object; a mapping is written
    as JSON; None is ``{}``. Anything else is refused as the Go client
    refuses it, with the code an executor would answer."""
    if arguments is None:
        return b"{}"
    if isinstance(arguments, (bytes, bytearray, memoryview)):
        raw = bytes(arguments)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _refuse(tool, RejectionCode.INVALID_UNICODE, f"arguments: {e}") from None
        _check_text(text, tool)
        return raw
    if isinstance(arguments, str):
        try:
            raw = arguments.encode("utf-8")
        except UnicodeEncodeError as e:
            raise _refuse(tool, RejectionCode.INVALID_UNICODE, f"arguments: {e}") from None
        _check_text(arguments, tool)
        return raw
    if not isinstance(arguments, Mapping):
        raise _refuse(
            tool,
            RejectionCode.ARGUMENTS_NOT_OBJECT,
            f"arguments must be a JSON object (a mapping, or its JSON text), not "
            f"{type(arguments).__qualname__}",
        )
    out: list[str] = []
    try:
        _dump(arguments, out, set(), "arguments")
    except RecursionError:
        raise _refuse(tool, RejectionCode.TOO_DEEP, "arguments nest too deeply") from None
    except _NoJSONError as e:
        raise _refuse(tool, RejectionCode.INVALID_JSON, str(e)) from None
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as e:
        raise _refuse(tool, RejectionCode.INVALID_UNICODE, f"arguments: {e}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_text(text: str, tool: str) -> None:
    try:
        json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise _refuse(tool, RejectionCode.TOO_DEEP, "arguments nest too deeply") from None
    except ValueError as e:
        raise _refuse(tool, RejectionCode.BAD_DATA, f"arguments are not valid JSON: {e}") from None
    if text.lstrip(" \t\r\n")[:1] != "{":
        raise _refuse(tool, RejectionCode.ARGUMENTS_NOT_OBJECT, "arguments must be a JSON object")


class _NoJSONError(Exception):
    pass


def _dump(value: object, out: list[str], active: set[int], path: str) -> None:
    """Writes value as JSON text to out: mappings with str keys, lists and
    tuples, str, int, finite float and Decimal, bool and None."""
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _NoJSONError(f"{path}: {value!r} has no JSON form")
        out.append(float.__repr__(value))
    elif isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise _NoJSONError(f"{path}: {value!r} has no JSON form")
        out.append(str(value))
    elif isinstance(value, (Mapping, list, tuple)):
        if id(value) in active:
            raise _NoJSONError(f"{path} contains itself")
        active.add(id(value))
        if isinstance(value, Mapping):
            out.append("{")
            for i, (name, item) in enumerate(value.items()):
                if not isinstance(name, str):
                    raise _NoJSONError(
                        f"{path}: a member name is a str, not {type(name).__qualname__}"
                    )
                if i:
                    out.append(",")
                out.append(json.dumps(name, ensure_ascii=False))
                out.append(":")
                _dump(item, out, active, f"{path}[{name!r}]")
            out.append("}")
        else:
            out.append("[")
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                _dump(item, out, active, f"{path}[{i}]")
            out.append("]")
        active.discard(id(value))
    else:
        raise _NoJSONError(f"{path}: a {type(value).__qualname__} has no JSON form")


def check_trace(traceparent: str | None, tracestate: str | None) -> None:
    """Refuses a trace context that is not W3C's (it travels in a header)."""
    if traceparent is None:
        if tracestate is not None:
            raise ValueError("tracestate without traceparent: give both, or neither")
        return
    if not isinstance(traceparent, str) or not _TRACEPARENT.fullmatch(traceparent):
        raise ValueError(
            f"traceparent {traceparent!r} is not a W3C trace context "
            "(version-traceid-parentid-flags)"
        )
    if tracestate is not None and (
        not isinstance(tracestate, str)
        or len(tracestate) > 512
        or any(not (" " <= c <= "~") for c in tracestate)
    ):
        raise ValueError(
            f"tracestate {tracestate!r} is not printable ASCII of 512 characters at most"
        )


def _quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def rfc3339(t: datetime.datetime) -> str:
    """t in UTC, as RFC 3339 with microseconds and Z."""
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def call_event(
    *,
    tenant: str,
    tool: str,
    run_id: str,
    call_id: str,
    source: str,
    arguments: bytes,
    time: datetime.datetime | None,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> bytes:
    """The call as a CloudEvent in the JSON event format (structured mode):
    §4's attributes, the data ``{"arguments": …}`` with the arguments as
    given, then the extensions in the order of their names."""
    parts = [
        '{"specversion":"1.0","id":',
        _quote(call_id),
        ',"source":',
        _quote(source),
        ',"type":',
        _quote(CALL_TYPE),
        ',"subject":',
        _quote(tool),
        ',"datacontenttype":"application/json"',
    ]
    if time is not None:
        parts += [',"time":', _quote(rfc3339(time))]
    head = "".join(parts) + ',"data":{"arguments":'
    tail = [',"runid":', _quote(run_id), ',"tenant":', _quote(tenant)]
    if traceparent is not None:
        tail += [',"traceparent":', _quote(traceparent)]
        if tracestate:
            tail += [',"tracestate":', _quote(tracestate)]
    return head.encode("utf-8") + arguments + ("}" + "".join(tail) + "}").encode("utf-8")


def call_headers(*, repeat: bool, traceparent: str | None) -> dict[str, str]:
    """The NATS headers of a call's message (§4)."""
    h = {"Content-Type": STRUCTURED_JSON, EXPECTED_STREAM_HEADER: CALL_STREAM}
    if traceparent is not None:
        h[TRACEPARENT_HEADER] = traceparent
    if repeat:
        h[REPEAT_HEADER] = "true"
    return h


# --- reading answers (§4, §5) --------------------------------------------------------

#: Headers as the client keeps them: each name with every value it had.
Headers = Mapping[str, Sequence[str]]


def single_valued(headers: Mapping[str, str] | None) -> dict[str, list[str]]:
    """Headers as nats-py gives a live message's (one value a name)."""
    return {k: [v] for k, v in (headers or {}).items()}


def parse_header_block(raw: bytes) -> dict[str, list[str]]:
    """The headers of a raw NATS header block, ``NATS/1.0`` and a status
    first, then ``Name: value`` lines, each value of a repeated name kept."""
    out: dict[str, list[str]] = {}
    lines = raw.decode("utf-8", errors="strict").split("\r\n")
    if not lines or not lines[0].startswith("NATS/"):
        raise MalformedAnswerError("the header block does not start with NATS/1.0")
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise MalformedAnswerError(f"header line {line[:64]!r} has no name")
        out.setdefault(name.strip(), []).append(value.strip())
    return out


def values(headers: Headers, name: str) -> list[str]:
    """Every value of the headers called name, matched without regard to case."""
    lower = name.lower()
    found: list[str] = []
    for k, vs in headers.items():
        if k.lower() == lower:
            found.extend(vs)
    return found


def percent_decode(s: str) -> str:
    """A binary-mode header value, percent-decoded (hex digits of either case);
    the result must be UTF-8."""
    if "%" not in s:
        return s
    out = bytearray()
    i = 0
    raw = s.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c != 0x25:  # %
            out.append(c)
            i += 1
            continue
        pair = raw[i + 1 : i + 3]
        if len(pair) != 2 or not all(chr(b) in "0123456789abcdefABCDEF" for b in pair):
            raise ValueError(f"'%' at offset {i} is not followed by two hex digits")
        out.append(int(pair, 16))
        i += 3
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the decoded value is not valid UTF-8") from None


def header_value(v: str) -> str:
    """The attribute a binary-mode header value carries: quoted strings (an
    older sender's) unescaped, then percent-decoded once."""
    if '"' not in v:
        return percent_decode(v)
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(v):
        c = v[i]
        if c == '"':
            quoted = not quoted
        elif quoted and c == "\\":
            if i + 1 == len(v):
                raise ValueError("the quoted string ends in a backslash")
            i += 1
            out.append(v[i])
        else:
            out.append(c)
        i += 1
    if quoted:
        raise ValueError("a quoted string is not closed")
    return percent_decode("".join(out))


def _media_type(ct: str) -> tuple[str, dict[str, str]]:
    mt, _, rest = ct.partition(";")
    params: dict[str, str] = {}
    for p in rest.split(";"):
        k, sep, v = p.partition("=")
        if sep:
            params[k.strip().lower()] = v.strip().strip('"')
    return mt.strip().lower(), params


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"member {k!r} appears twice")
        d[k] = v
    return d


def _load(data: bytes | str, what: str, subject: str | None) -> Any:
    try:
        return json.loads(data, object_pairs_hook=_strict_object, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise MalformedAnswerError(f"{what} is not JSON: {e}", subject=subject) from None


def is_structured(headers: Headers) -> bool:
    """Whether a message is in structured mode: a Content-Type of
    application/cloudevents…, or neither a Content-Type nor a ce- header."""
    cts = values(headers, "Content-Type")
    if any(ct.strip().lower().startswith("application/cloudevents") for ct in cts):
        return True
    has_ce = any(k.lower().startswith("ce-") and len(k) > 3 for k in headers)
    return not cts and not has_ce


def decode_answer(
    headers: Headers | None,
    data: bytes,
    *,
    subject: str | None = None,
    seq: int | None = None,
) -> RunEvent:
    """An answer or audit event from a message's headers and payload, in
    either mode. Raises MalformedAnswerError for anything that is not a
    toolexec answer."""
    h: Headers = headers or {}
    cts = values(h, "Content-Type")
    if len(cts) > 1:
        raise MalformedAnswerError("Content-Type is given more than once", subject=subject)
    attrs: dict[str, Any]
    payload: Any
    if is_structured(h):
        if cts:
            mt, params = _media_type(cts[0])
            if mt != STRUCTURED_JSON or params.get("charset", "utf-8").lower() != "utf-8":
                raise MalformedAnswerError(f"event format {cts[0]!r} is not JSON", subject=subject)
        event = _load(data, "the structured event", subject)
        if not isinstance(event, dict):
            raise MalformedAnswerError("the structured event is not a JSON object", subject=subject)
        attrs = {k: v for k, v in event.items() if k not in ("data", "data_base64")}
        if "data_base64" in event:
            try:
                raw = base64.b64decode(event["data_base64"], validate=True)
            except (binascii.Error, TypeError, ValueError):
                raise MalformedAnswerError("data_base64 is not base64", subject=subject) from None
            payload = _load(raw, "the data", subject)
        else:
            payload = event.get("data")
    else:
        attrs = {}
        for k, vs in h.items():
            if len(k) <= 3 or k[:3].lower() != "ce-":
                continue
            name = k[3:].lower()
            if name in attrs or len(vs) != 1:
                raise MalformedAnswerError(f"header ce-{name} is given twice", subject=subject)
            try:
                attrs[name] = header_value(vs[0])
            except ValueError as e:
                raise MalformedAnswerError(f"header ce-{name}: {e}", subject=subject) from None
        if cts:
            dct = attrs.get("datacontenttype")
            if dct is not None and dct != cts[0]:
                raise MalformedAnswerError(
                    "ce-datacontenttype disagrees with Content-Type", subject=subject
                )
            attrs["datacontenttype"] = cts[0]
        payload = _load(data, "the data", subject) if data else None
    return _answer(attrs, payload, subject, seq)


def _str_attr(attrs: Mapping[str, Any], name: str, subject: str | None) -> str | None:
    v = attrs.get(name)
    if v is None:
        return None
    if not isinstance(v, str):
        raise MalformedAnswerError(
            f"attribute {name} is {type(v).__name__}, not a string", subject=subject
        )
    return v


def _token_attr(attrs: Mapping[str, Any], name: str, subject: str | None) -> str | None:
    v = _str_attr(attrs, name, subject)
    if v is not None and not valid_token(v):
        raise MalformedAnswerError(f"{name} {v!r} is not a valid token", subject=subject)
    return v


def parse_time(s: str, subject: str | None = None) -> datetime.datetime:
    """An RFC 3339 time (nanoseconds cut to microseconds)."""
    m = re.fullmatch(
        r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})", s
    )
    if m is None:
        raise MalformedAnswerError(f"time {s!r} is not RFC 3339", subject=subject)
    date, clock, frac, zone = m.groups()
    text = f"{date}T{clock}"
    if frac:
        text += "." + (frac + "000000")[:6]
    text += "+00:00" if zone in ("Z", "z") else zone
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise MalformedAnswerError(f"time {s!r} is not RFC 3339", subject=subject) from None


def _answer(attrs: Mapping[str, Any], data: Any, subject: str | None, seq: int | None) -> RunEvent:
    sv = attrs.get("specversion")
    if sv != "1.0":
        raise MalformedAnswerError(f"specversion {sv!r}, want '1.0'", subject=subject)
    typ = _str_attr(attrs, "type", subject) or ""
    try:
        if not typ.startswith(EVENT_TYPE_PREFIX):
            raise ValueError(typ)
        kind = RunEventKind.from_wire(typ[len(EVENT_TYPE_PREFIX) :])
    except ValueError:
        raise MalformedAnswerError(f"type {typ!r} is not an answer's", subject=subject) from None
    event_id = _str_attr(attrs, "id", subject)
    source = _str_attr(attrs, "source", subject)
    if not event_id or not source:
        raise MalformedAnswerError("the event has no id or no source", subject=subject)
    dct = _str_attr(attrs, "datacontenttype", subject)
    if dct is not None and _media_type(dct)[0] != JSON_MEDIA:
        raise MalformedAnswerError(f"datacontenttype {dct!r}, want {JSON_MEDIA}", subject=subject)
    tenant = _token_attr(attrs, "tenant", subject)
    if tenant is None:
        raise MalformedAnswerError("the event names no tenant", subject=subject)
    run_id = _token_attr(attrs, "runid", subject)
    call_id = _token_attr(attrs, "callid", subject)
    tool = _token_attr(attrs, "subject", subject)
    key = _str_attr(attrs, "idempotencykey", subject)
    time_s = _str_attr(attrs, "time", subject)
    time = parse_time(time_s, subject) if time_s is not None else None
    traceparent = _str_attr(attrs, "traceparent", subject)
    tracestate = _str_attr(attrs, "tracestate", subject)

    if not isinstance(data, dict):
        raise MalformedAnswerError("the data is not a JSON object", subject=subject)

    def member(name: str, typ: type, required: bool) -> Any:
        v = data.get(name)
        if v is None:
            if required:
                raise MalformedAnswerError(
                    f"a {kind.wire_kind} answer's data has no {name}", subject=subject
                )
            return None
        if not isinstance(v, typ):
            raise MalformedAnswerError(
                f"data member {name} is {type(v).__name__}, want {typ.__name__}", subject=subject
            )
        return v

    answer = kind.is_answer
    data_tool = member("tool", str, answer and kind is not RunEventKind.TOOL_REJECTED)
    if data_tool:
        if tool is not None and tool != data_tool:
            raise MalformedAnswerError(
                "the subject attribute names another tool than the data", subject=subject
            )
        if not valid_token(data_tool):
            raise MalformedAnswerError(f"tool {data_tool!r} is not a valid token", subject=subject)
        tool = data_tool
    data_key = member("key", str, kind is RunEventKind.TOOL_RESOLVED)
    if data_key is not None:
        if key is not None and key != data_key:
            raise MalformedAnswerError(
                "the idempotencykey extension disagrees with the data", subject=subject
            )
        key = data_key
    if key is not None and not _KEY.fullmatch(key):
        raise MalformedAnswerError(f"key {key!r} is not 64 lowercase hex digits", subject=subject)
    if answer and kind is not RunEventKind.TOOL_REJECTED and (run_id is None or call_id is None):
        raise MalformedAnswerError(
            f"a {kind.wire_kind} answer names no run or no call", subject=subject
        )

    outcome = member(
        "outcome", str, kind in (RunEventKind.TOOL_COMPLETED, RunEventKind.TOOL_DEDUPLICATED)
    )
    if kind is RunEventKind.TOOL_DEDUPLICATED and key is None:
        raise MalformedAnswerError("a deduplicated answer carries no key", subject=subject)
    error = member("error", str, kind in (RunEventKind.TOOL_FAILED, RunEventKind.TOOL_REJECTED))
    code_s = member("code", str, kind in (RunEventKind.TOOL_FAILED, RunEventKind.TOOL_REJECTED))
    code: RejectionCode | FailureCode | str | None = None
    if code_s is not None:
        code = coerce(FailureCode if kind is RunEventKind.TOOL_FAILED else RejectionCode, code_s)
    reason_s = member("reason", str, kind is RunEventKind.TOOL_INDETERMINATE)
    reason = coerce(IndeterminateReason, reason_s) if reason_s is not None else None
    body_entered = member("body_entered", bool, kind is RunEventKind.TOOL_INDETERMINATE)
    action = member("action", str, kind is RunEventKind.TOOL_RESOLVED)
    return RunEvent(
        kind=kind,
        tenant=tenant,
        tool=tool,
        run_id=run_id,
        call_id=call_id,
        key=key,
        outcome=outcome,
        error=error,
        code=code,
        field=member("field", str, False),
        reason=reason,
        body_entered=body_entered,
        action=action,
        operator=member("operator", str, False),
        time=time,
        id=event_id,
        source=source,
        subject=subject,
        seq=seq,
        traceparent=traceparent,
        tracestate=tracestate,
    )


# --- JetStream's and the services' replies -----------------------------------------------


def api_error(reply: Mapping[str, Any]) -> tuple[int, int, str] | None:
    """The error of a JetStream API reply (or PubAck): its code, error code
    and description; None when the reply is not an error."""
    err = reply.get("error")
    if not isinstance(err, Mapping):
        return None
    code = err.get("code")
    err_code = err.get("err_code")
    desc = err.get("description")
    return (
        code if isinstance(code, int) else 0,
        err_code if isinstance(err_code, int) else 0,
        desc if isinstance(desc, str) else "",
    )


def stored_message(reply: Mapping[str, Any]) -> RunEvent:
    """The answer in a reply to a JetStream message get."""
    msg = reply.get("message")
    if not isinstance(msg, Mapping):
        raise MalformedAnswerError("the message get's reply holds no message")
    subject = msg.get("subject") if isinstance(msg.get("subject"), str) else None
    seq = msg.get("seq") if isinstance(msg.get("seq"), int) else None
    try:
        hdrs = base64.b64decode(msg.get("hdrs") or b"", validate=True)
        data = base64.b64decode(msg.get("data") or b"", validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise MalformedAnswerError("the stored message is not base64", subject=subject) from None
    headers = parse_header_block(hdrs) if hdrs else {}
    return decode_answer(headers, data, subject=subject, seq=seq)


def history_event(ev: Mapping[str, Any]) -> RunEvent:
    """An event of a history reply (§7): its header object and base64 data."""
    subject = ev.get("subject") if isinstance(ev.get("subject"), str) else None
    seq = ev.get("seq") if isinstance(ev.get("seq"), int) else None
    if ev.get("omitted"):
        raise MalformedAnswerError(
            f"the event (sequence {seq}) is larger than a history reply may be", subject=subject
        )
    header = ev.get("header") or {}
    if not isinstance(header, Mapping) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
        for k, v in header.items()
    ):
        raise MalformedAnswerError("the event's header is not names and lists", subject=subject)
    try:
        data = base64.b64decode(ev.get("data") or b"", validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise MalformedAnswerError("the event's data is not base64", subject=subject) from None
    return decode_answer(header, data, subject=subject, seq=seq)


def load_reply(data: bytes, what: str) -> dict[str, Any]:
    """A service's JSON reply, which must be an object."""
    try:
        v = json.loads(data)
    except ValueError as e:
        raise MalformedAnswerError(f"the {what} reply is not JSON: {e}") from None
    if not isinstance(v, dict):
        raise MalformedAnswerError(f"the {what} reply is not a JSON object")
    return v


def strings(v: object) -> Iterable[str]:
    """v when it is a list of strings, else nothing."""
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return v
    return ()
