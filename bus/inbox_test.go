package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// TestConnectInboxPrefix checks that ConnectConfig.InboxPrefix refuses prefixes
// that are not plain subjects, and that a connection made with one takes its
// reply subjects under it.
func TestConnectInboxPrefix(t *testing.T) {
	for _, give := range []string{"_INBOX.*", "_INBOX_acme.>", "_INBOX_acme.", ".x", "a..b", "a b"} {
		t.Run(give, func(t *testing.T) {
			if _, err := (bus.ConnectConfig{InboxPrefix: give}).Options(); !errors.Is(err, bus.ErrInvalidConfig) {
				t.Errorf("Options() with inbox prefix %q = %v, want ErrInvalidConfig", give, err)
			}
		})
	}
	s := natstest.Start(t)
	nc, err := bus.Connect(bus.ConnectConfig{URL: s.ClientURL(), InboxPrefix: "_INBOX_acme", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.NewInbox(); !strings.HasPrefix(got, "_INBOX_acme.") {
		t.Errorf("NewInbox() = %q, want it under _INBOX_acme.", got)
	}
}
