package main

import (
	"errors"
	"testing"
	"time"

	"github.com/tesserix/toolexec/tool/mcptool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// TestServerNote: the /readyz line of an MCP server names its state and
// since when; while it is down, why, the next attempt and what it costs.
func TestServerNote(t *testing.T) {
	now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	since := now.Add(-time.Minute)
	down := errors.New(`mcptool: upstream unavailable: mcp server "web": initialize: connection refused`)
	for _, tt := range []struct {
		name string
		give toolsfile.ServerStatus
		want string
	}{
		{"connected", toolsfile.ServerStatus{Name: "local", Status: mcptool.Status{State: mcptool.StateConnected, Since: since}, Tools: []string{"book"}},
			"mcp server local: connected since 2026-12-07T04:59:00Z"},
		{"connecting", toolsfile.ServerStatus{Name: "local", Status: mcptool.Status{State: mcptool.StateConnecting, Since: since}},
			"mcp server local: connecting since 2026-12-07T04:59:00Z"},
		{"down", toolsfile.ServerStatus{Name: "web", Tools: []string{"fetch", "web_text"}, Status: mcptool.Status{
			State: mcptool.StateDown, Since: since, Err: down, Failures: 3, RetryAt: now.Add(4 * time.Second)}},
			"mcp server web: down since 2026-12-07T04:59:00Z (3 failed attempts in a row, next in 4s; its 2 tools are rejected upstream_unavailable): " + down.Error()},
		{"down since start", toolsfile.ServerStatus{Name: "web", Tools: []string{"fetch"}, Waiting: true, Status: mcptool.Status{
			State: mcptool.StateDown, Since: since, Err: down, Failures: 1, RetryAt: now.Add(-time.Second)}},
			"mcp server web: down since 2026-12-07T04:59:00Z (1 failed attempts in a row, next in 0s; its 1 tools are rejected upstream_unavailable): " +
				down.Error() + "; not reached since start: its imported tools are not listed yet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := serverNote(tt.give, now); got != tt.want {
				t.Errorf("serverNote =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
