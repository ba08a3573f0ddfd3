"""The declarations @tool builds, read back by the Go side: each becomes a
tool.Spec (parameters, kind, key and check arguments, timeout) given to
tool.New, which compiles the parameters schema and checks the key and check
arguments against its properties, as an executor does with a tool it serves.
The Go program is written to a temporary module that uses this repository
(a replace directive), built once per session."""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import test_schema
import test_tools
from conftest import REPO, go_command
from toolexec import Idempotency, IdempotencyPolicy, tool

_MAIN = """package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/tesserix/toolexec/tool"
)

// decl is the catalog's declaration of a tool (docs/PROTOCOL.md §8).
type decl struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Parameters     json.RawMessage `json:"parameters"`
	Kind           string          `json:"kind"`
	KeyArguments   []string        `json:"key_arguments"`
	CheckArguments []string        `json:"check_arguments"`
	TimeoutMS      int64           `json:"timeout_ms"`
}

// Reads a JSON array of declarations on stdin; prints, for each, "ok" or
// the error of tool.New, one JSON string a line.
func main() {
	var ds []decl
	if err := json.NewDecoder(os.Stdin).Decode(&ds); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	body := func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", nil }
	for _, d := range ds {
		spec := tool.Spec{
			Name:        d.Name,
			Description: d.Description,
			Parameters:  d.Parameters,
			Timeout:     time.Duration(d.TimeoutMS) * time.Millisecond,
		}
		if d.Kind != "" {
			spec.Idempotency = &tool.Policy{
				Kind:           tool.Kind(d.Kind),
				KeyArguments:   d.KeyArguments,
				CheckArguments: d.CheckArguments,
			}
		}
		result := "ok"
		if _, err := tool.New(spec, body); err != nil {
			result = err.Error()
		}
		out, _ := json.Marshal(result)
		fmt.Println(string(out))
	}
}
"""


@pytest.fixture(scope="session")
def tool_new(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A program that gives declarations to the Go side's tool.New."""
    go = go_command()
    mod = tmp_path_factory.mktemp("declcheck")
    (mod / "go.mod").write_text(
        "module declcheck\n\ngo 1.26\n\n"
        "require github.com/tesserix/toolexec v0.0.0\n\n"
        f"replace github.com/tesserix/toolexec => {REPO}\n"
    )
    (mod / "go.sum").write_bytes((REPO / "go.sum").read_bytes())
    (mod / "main.go").write_text(_MAIN)
    out = mod / "declcheck"
    p = subprocess.run(
        [go, "build", "-mod=mod", "-o", str(out), "."],
        cwd=mod,
        env={**os.environ, "GOWORK": "off"},
        capture_output=True,
        check=False,
        timeout=900,
    )
    if p.returncode != 0:
        pytest.fail(f"go build of the declaration check: {p.stderr.decode(errors='replace')}")
    return out


def go_verdicts(program: Path, decls: list[dict[str, Any]]) -> list[str]:
    p = subprocess.run(
        [str(program)],
        input=json.dumps(decls).encode(),
        capture_output=True,
        check=True,
        timeout=60,
    )
    verdicts = [json.loads(line) for line in p.stdout.decode().splitlines()]
    assert len(verdicts) == len(decls)
    return verdicts


def _declarations() -> list[dict[str, Any]]:
    decls = []
    for i, (hint, _) in enumerate(test_schema.TABLE):

        def body(x: Any) -> None:
            del x

        body.__annotations__ = {"x": hint, "return": None}
        policy = IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=["x"])
        decls.append(tool(name=f"hint_{i}", idempotency=policy, timeout=1.5)(body).declaration())

    def reserve(booking: test_schema.Booking, address: test_schema.Address) -> None:
        """Reserve."""

    decls.append(tool(reserve).declaration())
    for t in (test_tools.book, test_tools.fare, test_tools.ping, test_tools.wait):
        decls.append(t.declaration())
    return decls


def test_the_go_side_accepts_every_declaration(tool_new: Path) -> None:
    decls = _declarations()
    verdicts = go_verdicts(tool_new, decls)
    refused = {d["name"]: v for d, v in zip(decls, verdicts, strict=True) if v != "ok"}
    assert refused == {}


def test_the_go_side_refuses_what_python_refuses(tool_new: Path) -> None:
    # The harness can say no: a key argument that is not a parameter, which
    # @tool refuses at decoration, Go refuses too.
    decl = test_tools.book.declaration()
    decl["key_arguments"] = ["flihgt"]
    (verdict,) = go_verdicts(tool_new, [decl])
    assert "flihgt" in verdict
    assert "not a parameter" in verdict
