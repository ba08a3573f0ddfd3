package main

import (
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// TestInboxPrefix checks --inbox-prefix: the replies of a call (its PubAck)
// arrive under the prefix given, which is what credentials allowed to
// subscribe under a prefix of their own only require, and a prefix with
// wildcards is bad input.
func TestInboxPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nc := natstest.Connect(t, e.srv)
	spy, err := nc.SubscribeSync("_INBOX_acme.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r := e.emit(t, "", "--inbox-prefix", "_INBOX_acme", "call", "--tenant", tenant, "--run", "run_1", "--tool", "lookup_fare", "--args", fareArgs)
	mustExit(t, r, exitOK)
	if m, err := spy.NextMsg(30 * time.Second); err != nil {
		t.Errorf("no reply arrived under _INBOX_acme: %v", err)
	} else if len(m.Data) == 0 {
		t.Errorf("empty reply on %s", m.Subject)
	}

	r = e.emit(t, "", "--inbox-prefix", "_INBOX.*", "call", "--tenant", tenant, "--run", "run_1", "--tool", "lookup_fare", "--args", fareArgs)
	mustExit(t, r, exitUsage)
}
