package natstool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/tool/natstool"
)

// BenchmarkBody: one body request and its reply through an embedded server,
// 64 in flight, with and without listening for extra replies (which keeps
// each reply subject ExtraReplyWindow longer).
func BenchmarkBody(b *testing.B) {
	for _, bc := range []struct {
		name  string
		extra func(string)
	}{{"plain", nil}, {"extra-replies", func(string) {}}} {
		b.Run(bc.name, func(b *testing.B) {
			s := natstest.Start(b)
			w := natstest.Connect(b, s)
			if _, err := w.QueueSubscribe(wire.BodySubject("book"), wire.BodyQueue, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
				b.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			tl, err := natstool.New(bookSpec, natstool.Endpoint{Conn: natstest.Connect(b, s), OnExtraReply: bc.extra})
			if err != nil {
				b.Fatal(err)
			}
			args := json.RawMessage(`{"flight":"BA117"}`)
			b.SetParallelism(32) // 64 in flight on 2 CPUs
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tl.Call(context.Background(), callCtx, args); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
