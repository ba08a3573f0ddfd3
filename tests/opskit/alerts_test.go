package opskit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const promtoolFix = "apt-get install prometheus (Debian's package brings promtool), as .ci/run does"

// TestAlertRules: promtool accepts deploy/prometheus/alerts.yml and its unit
// tests pass: each alert fires when its condition has held long enough, with
// the labels and the text an operator reads, and stays silent otherwise.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool", "TOOLEXEC_PROMTOOL", promtoolFix)
	dir := filepath.Join(root, "deploy", "prometheus")
	out, errOut, err := run(t, dir, promtool, "check", "rules", "alerts.yml")
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(out+errOut, "SUCCESS: 8 rules found") {
		t.Errorf("promtool check rules: want 8 rules:\n%s%s", out, errOut)
	}
	out, errOut, err = run(t, dir, promtool, "test", "rules", "alerts_test.yml")
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s%s", err, out, errOut)
	}
	t.Logf("promtool test rules: %s", strings.TrimSpace(out+errOut))
}

// TestAlertRuleTestsCatchABrokenRule: the unit tests are not vacuous — with
// one threshold changed, promtool test rules fails.
func TestAlertRuleTestsCatchABrokenRule(t *testing.T) {
	promtool := tool(t, "promtool", "TOOLEXEC_PROMTOOL", promtoolFix)
	src := filepath.Join(root, "deploy", "prometheus")
	rules, err := os.ReadFile(filepath.Join(src, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(src, "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to string }{
		{"an hour is two", "oldest_timestamp_seconds) > 3600", "oldest_timestamp_seconds) > 7200"},
		{"sum instead of max", "max by (job) (toolexec_consumer_pending_messages) > 100", "sum by (job) (toolexec_consumer_pending_messages) > 100"},
		{"ready counted per executor", "sum by (job) (toolexec_ready) < 1", "min by (job) (toolexec_ready) < 1"},
		{"a second reply tolerated", "(increase(toolexec_worker_extra_replies_total[10m])) > 0", "(increase(toolexec_worker_extra_replies_total[10m])) > 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(string(rules), c.from) {
				t.Fatalf("alerts.yml no longer has %q", c.from)
			}
			dir := t.TempDir()
			broken := strings.Replace(string(rules), c.from, c.to, 1)
			if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), []byte(broken), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "alerts_test.yml"), tests, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, errOut, err := run(t, dir, promtool, "test", "rules", "alerts_test.yml"); err == nil {
				t.Errorf("promtool test rules passed with the rule broken:\n%s%s", out, errOut)
			}
		})
	}
}
