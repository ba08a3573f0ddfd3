package accountcheck

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// TestRefusalsLogSparingly: the first refusal is logged at once, the ones that
// follow within LogEvery are counted, and the next line says how many went
// unlogged.
func TestRefusalsLogSparingly(t *testing.T) {
	var buf testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var r refusals
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at    time.Duration
		from  string
		lines int
	}{
		{0, "", 1},
		{time.Second, "acme", 1},
		{LogEvery - time.Second, "", 1},
		{LogEvery, "acme", 2},
		{LogEvery + time.Second, "acme", 2},
		{3 * LogEvery, "globex", 3},
	}
	for i, s := range steps {
		r.log(log, t0.Add(s.at), "admin", "toolexec.admin.forget", s.from, "ADMIN")
		if n := strings.Count(buf.String(), "\n"); n != s.lines {
			t.Fatalf("after refusal %d: %d lines, want %d:\n%s", i, n, s.lines, buf.String())
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for i, want := range []string{"account=(none) admin_account=ADMIN refused_unlogged=0", "account=acme admin_account=ADMIN refused_unlogged=2", "account=globex admin_account=ADMIN refused_unlogged=1"} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], `msg="admin: request refused`) {
			t.Errorf("line %d %q, want WARN from admin with %q", i, lines[i], want)
		}
	}
}
