package main

import (
	"strings"
	"testing"
)

// TestRun pins the example's output: the README quotes it.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := `book BA117                     → completed: PNR-BA117-1 (key dcaca72c477e…)
retry with a new request_id    → TOOL_DEDUPLICATED: PNR-BA117-1 (key dcaca72c477e…)
book BA999 (answer lost)       → TOOL_INDETERMINATE (body_failed)
                                 IndeterminateOutcomeError: tool=book reason=body_failed body_entered=true
retry BA999                    → TOOL_INDETERMINATE (body_failed)
                                 IndeterminateOutcomeError: tool=book reason=body_failed body_entered=true
seats taken: BA117=1 BA999=1
`
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
