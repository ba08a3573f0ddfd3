package canonical_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

func benchDocs() map[string][]byte {
	var big strings.Builder
	big.WriteString("{")
	for i := range 200 {
		if i > 0 {
			big.WriteString(",")
		}
		fmt.Fprintf(&big, `"k%03d":{"name":"item %d","price":%d.%02d,"tags":["a","b"],"ok":true}`, 199-i, i, i, i%100)
	}
	big.WriteString("}")
	return map[string][]byte{
		"small-sorted":   []byte(`{"date":"2025-06-01","flight":"BA117","passenger":{"age":36,"name":"Ada Lovelace"},"request_id":"req-7f3a","seats":2}`),
		"small-unsorted": []byte(`{"flight":"BA117","seats":2,"date":"2025-06-01","passenger":{"name":"Ada Lovelace","age":36},"request_id":"req-7f3a"}`),
		"numbers":        []byte(`[0.1,1e-7,4.50,333333333.33333329,-0.0,1e21,9007199254740993,2.0,20e-1,123456.789e3]`),
		"unicode":        []byte("{\"city\":\"Zu\u0308rich\",\"caf\\u00e9\":\"\\ud83d\\ude00 na\u00efve \u65e5\u672c\",\"s\":\"\\t\\n\\u0001\"}"),
		"big":            []byte(big.String()),
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	for name, doc := range benchDocs() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := canonical.Canonicalize(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendCanonical(b *testing.B) {
	doc := benchDocs()["small-unsorted"]
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		var err error
		if buf, err = canonical.AppendCanonical(buf[:0], doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkObjectParse(b *testing.B) {
	doc := benchDocs()["small-unsorted"]
	var obj canonical.Object
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if err := obj.Parse(doc, canonical.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHugeExponent shows that exponents are never expanded.
func BenchmarkHugeExponent(b *testing.B) {
	doc := []byte(`[1e999999999,0e999999999,1e-999999999]`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := canonical.Canonicalize(doc); err == nil {
			b.Fatal("want an error")
		}
	}
}
