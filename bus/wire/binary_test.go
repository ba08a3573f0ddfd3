package wire_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
	"pgregory.net/rapid"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// drawnCases is how many calls, and how many answers, the oracle tests below
// draw: the i-th with seed i, so that every run sees the same ones.
const drawnCases = 5000

// drawnAnswer is an answer drawn with the source it is published from.
type drawnAnswer struct {
	a      events.Answer
	source string
}

var (
	callDraws   = rapid.Custom(drawCall)
	answerDraws = rapid.Custom(func(t *rapid.T) drawnAnswer {
		a, source := drawAnswer(t)
		return drawnAnswer{a, source}
	})
)

// TestCallMsgDecodesAsSDK holds the message CallMsg writes for each of
// drawnCases calls, in either mode, to the SDK's event of the call
// (CallEvent) and to that event as the SDK writes it (Encode): CallMsg fails
// where CallEvent does, and otherwise its message decodes, by Decode and by
// the SDK's binding alike, to what the SDK's message decodes to, which is
// the SDK's event whenever Decode accepts it. In binary mode the event's
// headers (ce- and Content-Type) and payload are the SDK's, header for header
// and byte for byte.
func TestCallMsgDecodesAsSDK(t *testing.T) {
	accepted := 0
	for seed := range drawnCases {
		c := callDraws.Example(seed)
		e, sdkErr := wire.CallEvent(c)
		for _, mode := range msgModes {
			msg, err := wire.CallMsg(c, mode)
			if !sameError(err, sdkErr) {
				t.Fatalf("seed %d, %s: CallMsg error %v, CallEvent's %v, for %+v", seed, mode, err, sdkErr, c)
			}
			if err != nil {
				continue
			}
			if d := decodesAsSDK(msg, e, mode); d != "" {
				t.Fatalf("seed %d, %s, call %+v: %s", seed, mode, c, d)
			}
			accepted++
		}
	}
	t.Logf("%d messages of %d calls in two modes accepted", accepted, drawnCases)
	if accepted < drawnCases/4 {
		t.Errorf("%d messages of %d calls in two modes accepted: the generator does not reach the messages compared", accepted, drawnCases)
	}
}

// TestAnswerMsgDecodesAsSDK holds the message AnswerMsg writes for each of
// drawnCases answers to the SDK's event of the answer (AnswerEvent), as
// TestCallMsgDecodesAsSDK does for calls.
func TestAnswerMsgDecodesAsSDK(t *testing.T) {
	accepted := 0
	for seed := range drawnCases {
		d := answerDraws.Example(seed)
		e, sdkErr := wire.AnswerEvent(d.a, d.source)
		for _, mode := range msgModes {
			msg, err := wire.AnswerMsg(d.a, d.source, mode)
			if !sameError(err, sdkErr) {
				t.Fatalf("seed %d, %s: AnswerMsg error %v, AnswerEvent's %v, for %+v from %q", seed, mode, err, sdkErr, d.a, d.source)
			}
			if err != nil {
				continue
			}
			if diff := decodesAsSDK(msg, e, mode); diff != "" {
				t.Fatalf("seed %d, %s, answer %+v from %q: %s", seed, mode, d.a, d.source, diff)
			}
			accepted++
		}
	}
	t.Logf("%d messages of %d answers in two modes accepted", accepted, drawnCases)
	if accepted < drawnCases/4 {
		t.Errorf("%d messages of %d answers in two modes accepted: the generator does not reach the messages compared", accepted, drawnCases)
	}
}

// decodesAsSDK reports how msg, written by CallMsg or AnswerMsg in mode,
// differs from the SDK's event e and e's message, or "".
func decodesAsSDK(msg *nats.Msg, e event.Event, mode wire.Mode) string {
	sh, sdata, err := wire.Encode(e, mode)
	if err != nil {
		return fmt.Sprintf("the SDK cannot write its event: %v", err)
	}
	if mode == wire.Binary {
		if d := sameEventFields(msg.Header, sh); d != "" {
			return d
		}
		if !bytes.Equal(msg.Data, sdata) {
			return fmt.Sprintf("payload %q, the SDK's %q", msg.Data, sdata)
		}
	}
	decoders := []struct {
		name     string
		decode   func(nats.Header, []byte) (event.Event, error)
		readsAll bool // reads every message the SDK writes
	}{{"Decode", wire.Decode, false}, {"the SDK's binding", sdkDecode, true}}
	for _, dec := range decoders {
		got, gotErr := dec.decode(msg.Header, msg.Data)
		want, wantErr := dec.decode(sh, sdata)
		if dec.readsAll && wantErr != nil {
			return fmt.Sprintf("%s cannot read the SDK's message: %v", dec.name, wantErr)
		}
		if !sameText(gotErr, wantErr) {
			return fmt.Sprintf("%s: error %v, on the SDK's message %v", dec.name, gotErr, wantErr)
		}
		if gotErr != nil {
			continue
		}
		if d := sameEvent(got, want); d != "" {
			return fmt.Sprintf("%s: against the SDK's message decoded: %s", dec.name, d)
		}
	}
	// Decode refuses what is not UTF-8, which the SDK writes as given and, in
	// structured mode, reads back as U+FFFD: the event itself comes back
	// where Decode accepts the message, and in binary mode from the SDK's
	// binding always.
	if got, err := wire.Decode(msg.Header, msg.Data); err == nil {
		if d := sameEvent(got, e); d != "" {
			return "Decode: against the SDK's event: " + d
		}
	}
	if mode == wire.Binary {
		got, err := sdkDecode(msg.Header, msg.Data)
		if err != nil {
			return fmt.Sprintf("the SDK's binding: %v", err)
		}
		if d := sameEvent(got, e); d != "" {
			return "the SDK's binding: against the SDK's event: " + d
		}
	}
	return ""
}

// isEventField reports whether a header field of that name carries a part of
// the event: a ce- attribute or the Content-Type.
func isEventField(name string) bool {
	return strings.EqualFold(name, wire.ContentType) || strings.HasPrefix(strings.ToLower(name), wire.HeaderPrefix)
}

// sameEventFields reports how the event fields (see isEventField) of got and
// want differ, or "".
func sameEventFields(got, want nats.Header) string {
	var diffs []string
	names := slices.Sorted(maps.Keys(got))
	for k := range want {
		if _, ok := got[k]; !ok {
			names = append(names, k)
		}
	}
	for _, k := range names {
		if isEventField(k) && !slices.Equal(got[k], want[k]) {
			diffs = append(diffs, fmt.Sprintf("%s: %q, the SDK's %q", k, got[k], want[k]))
		}
	}
	return strings.Join(diffs, "; ")
}

// sdkDecode reads a message's event with the SDK's binding (binding.ToEvent)
// through sdkMessage.
func sdkDecode(h nats.Header, data []byte) (event.Event, error) {
	e, err := binding.ToEvent(context.Background(), sdkMessage{h, data})
	if err != nil {
		return event.Event{}, err
	}
	return *e, nil
}

// sdkSpecs names the attributes as binary-mode headers do, for the SDK.
var sdkSpecs = spec.WithPrefix(wire.HeaderPrefix)

// sdkMessage is a NATS message as the SDK's binding reads one (a
// binding.MessageReader), written as the SDK's own protocol bindings are
// (its HTTP binding's Message) and held to the NATS binding's rules: a
// Content-Type of the event format makes it structured, the SDK's format
// reads the payload; else a ce-specversion the SDK knows makes it binary,
// and each ce- header, percent-decoded by the standard library
// (url.PathUnescape) rather than by this package, is set as the SDK sets an
// attribute or extension of that name, Content-Type as the
// datacontenttype. This package's code is not on that path.
type sdkMessage struct {
	h    nats.Header
	data []byte
}

func (m sdkMessage) ReadEncoding() binding.Encoding {
	if format.Lookup(m.h.Get(wire.ContentType)) != nil {
		return binding.EncodingStructured
	}
	if sdkSpecs.Version(m.h.Get(sdkSpecs.PrefixedSpecVersionName())) != nil {
		return binding.EncodingBinary
	}
	return binding.EncodingUnknown
}

func (m sdkMessage) ReadStructured(ctx context.Context, w binding.StructuredWriter) error {
	f := format.Lookup(m.h.Get(wire.ContentType))
	if f == nil {
		return binding.ErrNotStructured
	}
	return w.SetStructuredEvent(ctx, f, bytes.NewReader(m.data))
}

// field returns the value of the header field called name, percent-decoded
// unless it is the Content-Type, or nil.
func (m sdkMessage) field(name string) any {
	vs := m.h[name]
	if len(vs) == 0 {
		return nil
	}
	if name == wire.ContentType {
		return vs[0]
	}
	v, err := url.PathUnescape(vs[0])
	if err != nil {
		return nil
	}
	return v
}

func (m sdkMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	version := sdkSpecs.Version(m.h.Get(sdkSpecs.PrefixedSpecVersionName()))
	if version == nil {
		return nil, nil
	}
	attr := version.AttributeFromKind(k)
	switch {
	case attr == nil:
		return nil, nil
	case k == spec.DataContentType:
		return attr, m.field(wire.ContentType)
	}
	return attr, m.field(attr.PrefixedName())
}

func (m sdkMessage) GetExtension(name string) any { return m.field(wire.HeaderPrefix + name) }

func (m sdkMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	version := sdkSpecs.Version(m.h.Get(sdkSpecs.PrefixedSpecVersionName()))
	if version == nil {
		return binding.ErrNotBinary
	}
	for k, vs := range m.h {
		var err error
		switch {
		case k == wire.ContentType:
			err = w.SetAttribute(version.AttributeFromKind(spec.DataContentType), vs[0])
		case strings.HasPrefix(k, wire.HeaderPrefix):
			v, uerr := url.PathUnescape(vs[0])
			if uerr != nil {
				return fmt.Errorf("%s: %w", k, uerr)
			}
			if attr := version.Attribute(k); attr != nil {
				err = w.SetAttribute(attr, v)
			} else {
				err = w.SetExtension(k[len(wire.HeaderPrefix):], v)
			}
		}
		if err != nil {
			return err
		}
	}
	if len(m.data) == 0 {
		return nil
	}
	return w.SetData(bytes.NewReader(m.data))
}

// sameEvent reports how the events got and want differ, or "": attribute by
// attribute (a subject present but empty counts as present), extension by
// extension in their string form, and the data byte for byte.
func sameEvent(got, want event.Event) string {
	g, w := eventLines(got), eventLines(want)
	if slices.Equal(g, w) {
		return ""
	}
	return "event\n\t" + strings.Join(g, "\n\t") + "\nwant\n\t" + strings.Join(w, "\n\t")
}

// eventLines lists e's attributes, extensions and data, one a line.
func eventLines(e event.Event) []string {
	lines := []string{
		"specversion " + e.SpecVersion(), "id " + e.ID(), "source " + e.Source(), "type " + e.Type(),
		"datacontenttype " + e.DataContentType(), "dataschema " + e.DataSchema(),
	}
	if ec, ok := e.Context.(*event.EventContextV1); ok && ec.Subject != nil {
		lines = append(lines, "subject "+*ec.Subject)
	}
	if t := e.Time(); !t.IsZero() {
		lines = append(lines, "time "+t.UTC().Format(time.RFC3339Nano))
	}
	exts := e.Extensions()
	for _, name := range slices.Sorted(maps.Keys(exts)) {
		s, err := types.Format(exts[name])
		if err != nil {
			s = fmt.Sprintf("(%T %v)", exts[name], exts[name])
		}
		lines = append(lines, "extension "+name+" "+s)
	}
	return append(lines, "data "+string(e.Data()))
}
