package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOpsMetrics: the executor exports its build, its readiness, the shared
// consumer's backlog, and the keys awaiting decision per tenant, counted
// every --awaiting-interval.
func TestOpsMetrics(t *testing.T) {
	addr := freeAddr(t)
	url, _ := startExecutor(t, "--demo", "--metrics-addr", addr, "--awaiting-interval", "100ms")
	sentinelCalls(t, url) // one of them leaves acme's key indeterminate
	want := []string{
		`toolexec_build_info{goversion="go`,
		"toolexec_ready 1",
		"toolexec_consumer_pending_messages 0",
		"toolexec_consumer_ack_pending_messages ",
		`toolexec_keys_awaiting_decision{tenant="acme"} 1`,
		`toolexec_keys_awaiting_decision_oldest_timestamp_seconds{tenant="acme"} `,
		`toolexec_store_operation_duration_seconds_count{operation="count",store="jetstream"} `,
	}
	var body string
	deadline := time.Now().Add(15 * time.Second)
	for {
		var code int
		code, body = httpGet(t, "http://"+addr+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s after 15s:\n%s", missing, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(body, "refreshed_timestamp_seconds 0\n") {
		t.Error("the awaiting gauge was refreshed but says it never was")
	}
}

// TestAwaitingOff: --awaiting-interval 0 exports no awaiting gauge.
func TestAwaitingOff(t *testing.T) {
	addr := freeAddr(t)
	startExecutor(t, "--demo", "--metrics-addr", addr, "--awaiting-interval", "0")
	_, body := httpGet(t, "http://"+addr+"/metrics")
	if strings.Contains(body, "toolexec_keys_awaiting_decision") || !strings.Contains(body, "toolexec_ready") {
		t.Errorf("with --awaiting-interval 0: awaiting series present or ready absent:\n%s", body)
	}
}
