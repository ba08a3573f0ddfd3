"""Every key vector of the repository, reproduced: the independently computed
set the Go side was given (idemkey/testdata/keys.json) and the project's own
(schemas/vectors/keys.json), keys, canonical envelopes and refusals."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from conftest import load_vectors
from toolexec import Arguments, KeyDerivationError, canonical, idempotency_key

SHARED = "idemkey/testdata/keys.json"
PUBLISHED = "schemas/vectors/keys.json"


def _cases(rel: str) -> list[Any]:
    return [pytest.param(v, id=v["name"]) for v in load_vectors(rel)]


def _derive(v: dict[str, Any], arguments: Any) -> tuple[bytes, str]:
    kw = {
        "tenant": v["tenant"],
        "run_id": v["run_id"],
        "tool": v["tool"],
        "arguments": arguments,
        "key_arguments": v["key_arguments"],
    }
    return canonical(**kw), idempotency_key(**kw)


def check(v: dict[str, Any]) -> None:
    assert ("error" in v) != ("key" in v), "a vector has exactly one of key and error"
    for arguments in (v["arguments_json"], v["arguments_json"].encode("utf-8", "surrogatepass")):
        if "error" in v:
            with pytest.raises(KeyDerivationError) as info:
                _derive(v, arguments)
            assert info.value.code == v["error"]
            assert isinstance(info.value, ValueError)
            assert v["error"] in str(info.value)
            assert str(info.value.reason)  # says why, not only the code
            continue
        envelope, key = _derive(v, arguments)
        assert envelope.decode("utf-8") == v["canonical"]
        assert key == v["key"]
        assert hashlib.sha256(envelope).hexdigest() == key
        # One parse, then the key: the same.
        args = Arguments.parse(arguments)
        got = args.key(
            tenant=v["tenant"], run_id=v["run_id"], tool=v["tool"], key_arguments=v["key_arguments"]
        )
        assert got == key


@pytest.mark.parametrize("v", _cases(SHARED))
def test_shared_vectors(v: dict[str, Any]) -> None:
    check(v)


@pytest.mark.parametrize("v", _cases(PUBLISHED))
def test_published_vectors(v: dict[str, Any]) -> None:
    check(v)


def test_vector_counts() -> None:
    # The files are what the tests say they hold: a vector dropped or added
    # shows here (docs/PROTOCOL.md §6 names 73 of ours).
    shared, published = load_vectors(SHARED), load_vectors(PUBLISHED)
    assert (len(shared), sum("error" in v for v in shared)) == (29, 6)
    assert (len(published), sum("error" in v for v in published)) == (73, 24)


def test_shared_vectors_are_in_the_published_set() -> None:
    published = {v["name"]: v for v in load_vectors(PUBLISHED)}
    for v in load_vectors(SHARED):
        assert published.get(v["name"]) == v
