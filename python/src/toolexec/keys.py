"""Idempotency keys, derived exactly as the executors derive them.

    key = lowercase hex SHA-256 of canonical({"tenant": T, "run_id": R,
                                              "tool": N, "arguments": {...}})

where ``arguments`` holds the call's key arguments (docs/PROTOCOL.md §6). This
is the same derivation as the Go package ``idemkey`` and ``emitter key``: the
tests hold it to every vector of ``schemas/vectors/keys.json`` and of the
independently computed set in ``idemkey/testdata/keys.json``, and to the
emitter itself on generated arguments.

Which arguments count: ``key_arguments=None`` means every argument the call
sent; an empty sequence means none (the key is tenant, run and tool alone);
otherwise the named ones, in any order, repeats ignored, names compared after
NFC. A key argument the call did not send (absent, not null) makes the key
underivable: :class:`~toolexec.errors.KeyUnderivableError`. The call id is
deliberately not part of the key, so two concurrent identical calls share it.

The arguments may be given as JSON text (``str`` or ``bytes``), read with the
Go side's rules, or as Python values:

* JSON text: one object, RFC 8259 strictly (no byte order mark, comments,
  NaN, trailing commas or leading zeros); duplicate member names refused, and
  names equal after NFC; invalid UTF-8 and lone surrogate escapes refused;
  numbers kept exact (``9007199254740993`` stays itself; ``2.0``, ``20e-1``
  and ``0.2e1`` are ``2``; ``-0`` is ``0``); other numbers go through a double,
  and one beyond the doubles is refused. The whole text is checked, not only
  the key arguments.
* Python values: a mapping with ``str`` keys at the top; inside it mappings,
  lists and tuples, ``str``, ``int`` (exact below 10**21, through a double
  from there), ``float`` (through the double rule: ``2.0`` is ``2``),
  ``decimal.Decimal`` (as its text would be: ``Decimal("2.50")`` is ``2.5``),
  ``bool`` (never equal to 1) and ``None``. Anything else is refused
  (:class:`~toolexec.errors.UnsupportedValueError`).

The arguments may hold at most 1,000 members in an object, 10,000 elements in
an array and 20,000 values in all, nested at most 127 deep (the arguments
object included): the bounds the executors derive keys within.

Every refusal is a :class:`~toolexec.errors.KeyDerivationError` (a
``ValueError``) whose ``code`` is the Go side's code for the same input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

from . import _canonical
from .errors import InvalidArgumentsError, KeyErrorCode, KeyUnderivableError

__all__ = [
    "DEFAULT_MAX_ELEMENTS",
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_VALUES",
    "MAX_DEPTH",
    "Arguments",
    "canonical",
    "idempotency_key",
]

#: How deeply the arguments may nest, the arguments object counting as one
#: (the envelope around them adds the last of the canonical form's 128 levels).
MAX_DEPTH = _canonical.MAX_DEPTH - 1
#: The most members one object of the arguments may have.
DEFAULT_MAX_MEMBERS = 1_000
#: The most elements one array of the arguments may have.
DEFAULT_MAX_ELEMENTS = 10_000
#: The most values the arguments may hold in all (every member's value and
#: element, containers included, and the arguments object itself).
DEFAULT_MAX_VALUES = 20_000

_LIMITS = _canonical.Limits(
    depth=MAX_DEPTH,
    members=DEFAULT_MAX_MEMBERS,
    elements=DEFAULT_MAX_ELEMENTS,
    values=DEFAULT_MAX_VALUES,
)

#: What the arguments may be given as: a mapping, or the JSON text of an object.
ArgumentsLike: TypeAlias = Mapping[str, Any] | str | bytes | bytearray


class Arguments:
    """A call's arguments, validated and canonicalised once.

    Build it with :meth:`parse`; then :meth:`canonical` and :meth:`key` only
    pick members and hash, so one parse serves every key and envelope. It is
    immutable.
    """

    __slots__ = ("_index", "_members")

    def __init__(self, members: list[_canonical.Member]) -> None:
        self._members = tuple(members)
        self._index = {m.name: i for i, m in enumerate(self._members)}

    @classmethod
    def parse(cls, arguments: ArgumentsLike) -> Arguments:
        """Validate and canonicalise a call's arguments: a mapping, or the JSON
        text of an object (``str`` or UTF-8 ``bytes``).

        Raises:
            KeyDerivationError: with the code the Go side gives the same input
                (``invalid_json``, ``duplicate_member``, ``nfc_collision``,
                ``number_out_of_range``, ``invalid_unicode``, ``too_deep``,
                ``too_many_values``, ``arguments_not_object``).
        """
        if isinstance(arguments, str):
            # A str holding a lone surrogate has no UTF-8: encoded with the
            # surrogate's own bytes, it is refused where the Go side refuses
            # such bytes (invalid_unicode in a string, invalid_json elsewhere).
            raw = arguments.encode("utf-8", "surrogatepass")
            return cls(_canonical.read_text(raw, _LIMITS))
        if isinstance(arguments, (bytes, bytearray, memoryview)):
            return cls(_canonical.read_text(bytes(arguments), _LIMITS))
        return cls(_canonical.ValueReader(_LIMITS).top(arguments))

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the arguments, in NFC and in canonical order."""
        return tuple(m.name for m in self._members)

    def has(self, name: str) -> bool:
        """Whether the call sent an argument of this name (compared after NFC),
        whatever its value, null included."""
        return self._find(name) is not None

    def _find(self, name: str) -> int | None:
        if not isinstance(name, str):
            raise TypeError(f"an argument name is a str, not {type(name).__qualname__}")
        if not name.isascii():
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                return None  # a name no argument can have
            name = _canonical.nfc(name)
        return self._index.get(name)

    def canonical_arguments(self) -> bytes:
        """The canonical form of the whole arguments object."""
        return ("{" + ",".join(m.text for m in self._members) + "}").encode("utf-8")

    def canonical(
        self,
        *,
        tenant: str,
        run_id: str,
        tool: str,
        key_arguments: Iterable[str] | None = None,
    ) -> bytes:
        """The canonical envelope a key hashes. It holds the key arguments'
        values: log or store the key, never this."""
        chosen = self._choose(key_arguments)
        parts = [
            '{"arguments":{',
            ",".join(m.text for m in chosen),
            '},"run_id":',
            _token_string(run_id, "run_id"),
            ',"tenant":',
            _token_string(tenant, "tenant"),
            ',"tool":',
            _token_string(tool, "tool"),
            "}",
        ]
        return "".join(parts).encode("utf-8")

    def key(
        self,
        *,
        tenant: str,
        run_id: str,
        tool: str,
        key_arguments: Iterable[str] | None = None,
    ) -> str:
        """The idempotency key: 64 lowercase hex digits."""
        envelope = self.canonical(
            tenant=tenant, run_id=run_id, tool=tool, key_arguments=key_arguments
        )
        return hashlib.sha256(envelope).hexdigest()

    def _choose(self, key_arguments: Iterable[str] | None) -> list[_canonical.Member]:
        if key_arguments is None:
            return list(self._members)
        picked: set[int] = set()
        for name in _names(key_arguments):
            i = self._find(name)
            if i is None:
                raise KeyUnderivableError(name)
            picked.add(i)
        return [self._members[i] for i in sorted(picked)]


def _names(key_arguments: Iterable[str]) -> list[str]:
    if isinstance(key_arguments, (str, bytes)):
        raise TypeError(
            f"key_arguments is a sequence of names, not one string: did you mean "
            f"({key_arguments!r},)?"
        )
    names = list(key_arguments)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"a key argument is named by a str, not {type(name).__qualname__}")
    return names


def _token_string(value: str, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is a str, not {type(value).__qualname__}")
    text = str.__str__(value)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgumentsError(
                KeyErrorCode.INVALID_UNICODE,
                f"lone surrogate U+{ord(text[e.start]):04X} at index {e.start}",
                path=what,
            ) from None
        text = _canonical.nfc(text)
    return _canonical.quote(text)


def canonical(
    *,
    tenant: str,
    run_id: str,
    tool: str,
    arguments: ArgumentsLike,
    key_arguments: Iterable[str] | None = None,
) -> bytes:
    """The canonical envelope that :func:`idempotency_key` hashes: what
    ``emitter key --canonical`` prints (without its newline).

    It holds the key arguments' values: log or store the key, never this.
    Raises what :func:`idempotency_key` raises.
    """
    return Arguments.parse(arguments).canonical(
        tenant=tenant, run_id=run_id, tool=tool, key_arguments=key_arguments
    )


def idempotency_key(
    *,
    tenant: str,
    run_id: str,
    tool: str,
    arguments: ArgumentsLike,
    key_arguments: Iterable[str] | None = None,
) -> str:
    """The idempotency key of a call: 64 lowercase hex digits, the same the
    executors derive and ``emitter key`` prints.

    Args:
        tenant: The call's tenant.
        run_id: The call's run; a new run starts afresh.
        tool: The tool's name.
        arguments: The call's arguments: a mapping, or the JSON text of an
            object (``str`` or UTF-8 ``bytes``).
        key_arguments: The arguments that identify the effect: None for every
            argument, an empty sequence for none.

    Raises:
        KeyUnderivableError: A key argument is absent from the arguments
            (code ``key_underivable``).
        ArgumentsNotObjectError: The arguments are not an object.
        InvalidArgumentsError: The arguments (or the tenant, run id or tool)
            have no canonical form; ``code`` says why, as the Go side says it.
        TypeError: A parameter of the wrong type (key_arguments as one string,
            a tenant that is not a str).
    """
    return hashlib.sha256(
        canonical(
            tenant=tenant,
            run_id=run_id,
            tool=tool,
            arguments=arguments,
            key_arguments=key_arguments,
        )
    ).hexdigest()
