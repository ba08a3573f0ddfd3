package wire_test

import (
	"errors"
	"testing"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

func TestEventTypes(t *testing.T) {
	for _, k := range events.Kinds() {
		if want := "io.tesserix.toolexec." + string(k); wire.EventType(k) != want {
			t.Errorf("EventType(%q) = %q, want %q", k, wire.EventType(k), want)
		}
		back, err := wire.KindOfType(wire.EventType(k))
		if err != nil || back != k {
			t.Errorf("KindOfType(%q) = %q, %v; want %q", wire.EventType(k), back, err, k)
		}
	}
	for _, typ := range []string{wire.CallType, "", "io.tesserix.toolexec.", "io.tesserix.toolexec.nope", "com.example.completed", "completed"} {
		if _, err := wire.KindOfType(typ); !errors.Is(err, events.ErrUnknownKind) {
			t.Errorf("KindOfType(%q) error = %v, want ErrUnknownKind", typ, err)
		}
	}
	if wire.CallType != "io.tesserix.toolexec.call" {
		t.Errorf("CallType = %q", wire.CallType)
	}
}
