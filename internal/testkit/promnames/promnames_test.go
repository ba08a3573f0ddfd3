package promnames

import (
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want string
	}{
		{`up`, "up"},
		{`toolexec_calls_total`, "toolexec_calls_total"},
		{`sum by (kind) (rate(toolexec_calls_total{tool=~"$tool", kind!="rejected"}[$__rate_interval]))`, "toolexec_calls_total"},
		{`histogram_quantile(0.99, sum by (le, tool) (rate(toolexec_call_duration_seconds_bucket[5m])))`, "toolexec_call_duration_seconds_bucket"},
		{`sum without (instance) (a) / ignoring (code) group_left (tool) b offset 5m`, "a b"},
		{`max(toolexec_keys_awaiting_decision) or vector(0)`, "toolexec_keys_awaiting_decision"},
		{`time() - min by (tenant) (toolexec_keys_awaiting_decision_oldest_timestamp_seconds) > 3600`, "toolexec_keys_awaiting_decision_oldest_timestamp_seconds"},
		{`absent(toolexec_ready{job="toolexec"}) == bool 1`, "toolexec_ready"},
		{`{__name__="toolexec_ready", job="x"}`, "toolexec_ready"},
		{`{__name__=~"toolexec_.*"}`, ""},
		{`label_replace(x, "dst", "$1 by (y)", "src", "(.*)")`, "x"},
		{`deriv(max(toolexec_consumer_pending_messages)[10m:1m]) > 0 and max(toolexec_consumer_pending_messages) > 1e3`, "toolexec_consumer_pending_messages"},
		{"sum(rate(a[5m])) # a comment naming not_a_metric\n+ b", "a b"},
		{`count_values("version", toolexec_build_info) > -Inf`, "toolexec_build_info"},
		{`a @ start() + b @ 1609746000`, "a b"},
		{`sum by(job)(x)`, "x"},
		{`x[[interval]] + ${var:raw}`, "x"},
	} {
		got, err := Names(c.expr)
		if err != nil {
			t.Errorf("Names(%q): %v", c.expr, err)
			continue
		}
		want := strings.Fields(c.want)
		if len(want) == 0 {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Names(%q) = %q, want %q", c.expr, got, want)
		}
	}
}

func TestNamesRefusesBrokenExpressions(t *testing.T) {
	for _, expr := range []string{`sum(rate(x[5m])`, `x{a="b"`, `x{a="b}`, `rate(x[5m)`, `x)`, `x}`} {
		if got, err := Names(expr); err == nil {
			t.Errorf("Names(%q) = %q, want an error", expr, got)
		}
	}
}
