package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// tokenOracle is what readMembers must agree with on valid JSON: the object
// walked with encoding/json's tokenizer.
func tokenOracle(data []byte) (map[string]json.RawMessage, string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, "", false
	}
	out, dup := map[string]json.RawMessage{}, ""
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, "", false
		}
		name := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, "", false
		}
		if _, seen := out[name]; seen {
			if dup == "" {
				dup = name
			}
			continue
		}
		out[name] = raw
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return nil, "", false
	}
	return out, dup, true
}

func TestReadMembers(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
		dup  string
		ok   bool
	}{
		{"empty object", `{}`, map[string]string{}, "", true},
		{"spaces", " \t\r\n{ \n\"a\" :\t1 , \"b\":\"x\"\n}\n ", map[string]string{"a": "1", "b": `"x"`}, "", true},
		{"nested", `{"a":{"b":[1,{"c":"}"}]},"d":[]}`, map[string]string{"a": `{"b":[1,{"c":"}"}]}`, "d": "[]"}, "", true},
		{"escaped quote in value", `{"a":"x\"}y","b":2}`, map[string]string{"a": `"x\"}y"`, "b": "2"}, "", true},
		{"escaped name", `{"\u0069d":"c1"}`, map[string]string{"id": `"c1"`}, "", true},
		{"duplicate after escape", `{"id":"a","\u0069d":"b"}`, map[string]string{"id": `"a"`}, "id", true},
		{"duplicate keeps first", `{"a":1,"b":2,"a":3,"b":4}`, map[string]string{"a": "1", "b": "2"}, "a", true},
		{"literals", `{"t":true,"f":false,"n":null,"x":-1.5e3}`, map[string]string{"t": "true", "f": "false", "n": "null", "x": "-1.5e3"}, "", true},
		{"name not UTF-8", "{\"a\xffb\":1}", map[string]string{"a\uFFFDb": "1"}, "", true},
		{"trailing bytes are not read", `{"a":1} x`, map[string]string{"a": "1"}, "", true},
		{"array", `[1,2]`, nil, "", false},
		{"string", `"x"`, nil, "", false},
		{"empty", ``, nil, "", false},
		{"unclosed", `{"a":1`, nil, "", false},
		{"trailing comma", `{"a":1,}`, nil, "", false},
		{"missing colon", `{"a" 1}`, nil, "", false},
		{"missing value", `{"a":}`, nil, "", false},
		{"name not a string", `{a:1}`, nil, "", false},
		{"unclosed string", `{"a":"x}`, nil, "", false},
		{"unclosed array", `{"a":[1,2}`, nil, "", false},
		{"bad escape in name", `{"\x":1}`, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dup, err := readMembers(nil, []byte(tt.in))
			if (err == nil) != tt.ok || dup != tt.dup {
				t.Fatalf("readMembers(%.60q): dup %q err %v, want dup %q ok %v", tt.in, dup, err, tt.dup, tt.ok)
			}
			if !tt.ok {
				return
			}
			if !maps.Equal(asStrings(got), tt.want) {
				t.Fatalf("readMembers(%.60q) = %v, want %v", tt.in, asStrings(got), tt.want)
			}
		})
	}
}

// TestReadMembersStopsAtTheMistake: the members before a mistake are returned
// with the error (Peek addresses a rejection with them); nothing after it.
func TestReadMembersStopsAtTheMistake(t *testing.T) {
	got, _, err := readMembers(nil, []byte(`{"id":"c1","runid":"r1","n":tru,"x":2}`))
	if err == nil {
		t.Fatal("readMembers took tru for a literal")
	}
	if want := map[string]string{"id": `"c1"`, "runid": `"r1"`}; !maps.Equal(asStrings(got), want) {
		t.Fatalf("members before the mistake = %v, want %v", asStrings(got), want)
	}
	if _, _, err := readMembers(nil, []byte(`[{"id":"c1"}]`)); err != errNotObject {
		t.Fatalf("an array: err %v, want errNotObject", err)
	}
}

// TestReadMembersAppendSafe: a value returned cannot be grown into the bytes
// after it.
func TestReadMembersAppendSafe(t *testing.T) {
	data := []byte(`{"a":[1],"b":2}`)
	m, _, _ := readMembers(nil, data)
	a, _ := m.get("a")
	_ = append(a, '!')
	if string(data) != `{"a":[1],"b":2}` {
		t.Fatalf("appending to a member changed the input: %s", data)
	}
}

// TestManyMembers: past smallObject members, repeated names are still found,
// the first value kept, and the members in the document's order.
func TestManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"m%d":%d`, i%60, i)
	}
	b.WriteString("}")
	got, dup, err := readMembers(nil, []byte(b.String()))
	if err != nil || dup != "m0" || len(got) != 60 {
		t.Fatalf("readMembers: %d members, dup %q, err %v; want 60, m0, nil", len(got), dup, err)
	}
	for i, m := range got {
		if m.name != fmt.Sprintf("m%d", i) || string(m.value) != fmt.Sprint(i) {
			t.Fatalf("member %d is %s:%s, want m%d:%d", i, m.name, m.value, i, i)
		}
	}
	if v, ok := got.get("m59"); !ok || string(v) != "59" {
		t.Fatalf("get(m59) = %s, %v", v, ok)
	}
	if _, ok := got.get("m60"); ok {
		t.Fatal("get found a member that is not there")
	}
}

// TestReadMembersKnownNames: names the wire knows cost no allocation, escaped
// or not the result is the same, and a buffer reused from one payload to the
// next gives what a fresh one gives.
func TestReadMembersKnownNames(t *testing.T) {
	buf := make(members, 0, 4)
	for _, in := range []string{`{"id":"1","type":"t","data":{"a":1},"other":2}`, `{"\u0069d":"2"}`, `[]`, `{"a":1,"a":2}`} {
		want, wantDup, wantErr := readMembers(nil, []byte(in))
		got, gotDup, gotErr := readMembers(buf, []byte(in))
		if !maps.Equal(asStrings(got), asStrings(want)) || gotDup != wantDup || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: into a used buffer %v, %q, %v; fresh %v, %q, %v", in, got, gotDup, gotErr, want, wantDup, wantErr)
		}
		buf = got
	}
	if testenv.Race {
		return
	}
	data := []byte(`{"specversion":"1.0","id":"1","type":"t","data":{}}`)
	buf = make(members, 0, 8)
	if n := testing.AllocsPerRun(100, func() { readMembers(buf, data) }); n != 0 {
		t.Errorf("readMembers of known names into a buffer large enough allocates %v times, want 0", n)
	}
}

// FuzzMembers holds readMembers to encoding/json's tokenizer on every valid
// JSON input, and to not panicking on anything else.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"]"]},"a":2}`, `{"\u0061":"\""}`, `[1]`, `{"id":"x","data":{"arguments":{}}}`, ` { "a" : null } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, dup, err := readMembers(nil, data)
		if !json.Valid(data) {
			return
		}
		want, wantDup, wantOK := tokenOracle(data)
		if (err == nil) != wantOK || dup != wantDup {
			t.Fatalf("readMembers(%q): dup %q err %v; tokenizer: dup %q ok %v", data, dup, err, wantDup, wantOK)
		}
		if wantOK && !maps.EqualFunc(asRaw(got), want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("readMembers(%q) = %q; tokenizer: %q", data, got, want)
		}
	})
}

func BenchmarkReadMembers(b *testing.B) {
	data := []byte(`{"specversion":"1.0","id":"call-000123","source":"/agents/a1","type":"toolexec.call","runid":"run-42","datacontenttype":"application/json","data":{"arguments":{"flight":"BA117","seats":2,"check":"x"}}}`)
	buf := make(members, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := readMembers(buf, data); err != nil {
			b.Fatal(err)
		}
	}
}

func asStrings(ms members) map[string]string {
	m := make(map[string]string, len(ms))
	for _, mb := range ms {
		m[mb.name] = string(mb.value)
	}
	return m
}

func asRaw(ms members) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(ms))
	for _, mb := range ms {
		m[mb.name] = mb.value
	}
	return m
}
