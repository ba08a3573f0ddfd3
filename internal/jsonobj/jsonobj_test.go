package jsonobj

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// oracle is what Members must agree with on valid JSON: the object walked with
// encoding/json's tokenizer.
func oracle(data []byte) (map[string]json.RawMessage, string, bool) {
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
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", false
	}
	return out, dup, true
}

func TestMembers(t *testing.T) {
	deep := `{"id":"c1","data":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `,"runid":"r"}`
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
		{"deeper than encoding/json", deep, map[string]string{"id": `"c1"`, "data": strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "runid": `"r"`}, "", true},
		{"array", `[1,2]`, nil, "", false},
		{"string", `"x"`, nil, "", false},
		{"empty", ``, nil, "", false},
		{"unclosed", `{"a":1`, nil, "", false},
		{"trailing comma", `{"a":1,}`, nil, "", false},
		{"missing colon", `{"a" 1}`, nil, "", false},
		{"missing value", `{"a":}`, nil, "", false},
		{"name not a string", `{a:1}`, nil, "", false},
		{"trailing bytes are not read", `{"a":1} x`, map[string]string{"a": "1"}, "", true},
		{"unclosed string", `{"a":"x}`, nil, "", false},
		{"unclosed array", `{"a":[1,2}`, nil, "", false},
		{"bad escape in name", `{"\x":1}`, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dup, ok := Members([]byte(tt.in))
			if ok != tt.ok || dup != tt.dup {
				t.Fatalf("Members(%.60q): dup %q ok %v, want dup %q ok %v", tt.in, dup, ok, tt.dup, tt.ok)
			}
			if !ok {
				if got != nil {
					t.Fatalf("Members(%.60q) returned members with ok=false", tt.in)
				}
				return
			}
			gotS := map[string]string{}
			for _, m := range got {
				if _, twice := gotS[m.Name]; twice {
					t.Fatalf("Members(%.60q) holds %q twice", tt.in, m.Name)
				}
				gotS[m.Name] = string(m.Value)
			}
			if !maps.Equal(gotS, tt.want) {
				t.Fatalf("Members(%.60q) = %v, want %v", tt.in, gotS, tt.want)
			}
		})
	}
}

// TestMembersAppendSafe checks that a returned value cannot be grown into the
// bytes after it.
func TestMembersAppendSafe(t *testing.T) {
	data := []byte(`{"a":[1],"b":2}`)
	m, _, _ := Members(data)
	a, _ := m.Get("a")
	_ = append(a, '!')
	if string(data) != `{"a":[1],"b":2}` {
		t.Fatalf("appending to a member changed the input: %s", data)
	}
}

func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"]"]},"a":2}`, `{"\u0061":"\""}`, `[1]`, `{"id":"x","data":{"arguments":{}}}`, ` { "a" : null } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, dup, ok := Members(data) // must not panic on anything
		if !json.Valid(data) {
			return
		}
		want, wantDup, wantOK := oracle(data)
		if ok != wantOK || dup != wantDup {
			t.Fatalf("Members(%q): dup %q ok %v; tokenizer: dup %q ok %v", data, dup, ok, wantDup, wantOK)
		}
		if len(got) != len(want) || !maps.EqualFunc(asMap(got), want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("Members(%q) = %q; tokenizer: %q", data, got, want)
		}
	})
}

// TestManyMembers: past smallObject members, repeated names are still found,
// the first value kept, and the order of the members is the document's.
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
	got, dup, ok := Members([]byte(b.String()))
	if !ok || dup != "m0" || len(got) != 60 {
		t.Fatalf("Members: %d members, dup %q, ok %v; want 60, m0, true", len(got), dup, ok)
	}
	for i, m := range got {
		if m.Name != fmt.Sprintf("m%d", i) || string(m.Value) != fmt.Sprint(i) {
			t.Fatalf("member %d is %s:%s, want m%d:%d", i, m.Name, m.Value, i, i)
		}
	}
	if v, ok := got.Get("m59"); !ok || string(v) != "59" {
		t.Fatalf("Get(m59) = %s, %v", v, ok)
	}
	if _, ok := got.Get("m60"); ok {
		t.Fatal("Get found a member that is not there")
	}
}

func BenchmarkMembers(b *testing.B) {
	data := []byte(`{"specversion":"1.0","id":"call-000123","source":"/agents/a1","type":"toolexec.call","runid":"run-42","datacontenttype":"application/json","data":{"arguments":{"flight":"BA117","seats":2,"check":"x"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := Members(data); !ok {
			b.Fatal("not an object")
		}
	}
}

// TestNamesMembers: a Names reader returns what Members returns, its own names
// included, escaped or not, and allocates no string for a name it knows.
func TestNamesMembers(t *testing.T) {
	names := NewNames("id", "type", "data")
	for _, in := range []string{
		`{"id":"1","type":"t","data":{"a":1},"other":2}`,
		`{"\u0069d":"1","type":"t"}`,
		`{"id":"1","id":"2"}`,
		`{}`, `[]`, `{"id"}`,
	} {
		want, wantDup, wantOK := Members([]byte(in))
		got, gotDup, gotOK := names.Members([]byte(in))
		if !reflect.DeepEqual(got, want) || gotDup != wantDup || gotOK != wantOK {
			t.Errorf("%s: Names.Members = %v, %q, %v; Members = %v, %q, %v", in, got, gotDup, gotOK, want, wantDup, wantOK)
		}
	}
	// A buffer reused from one object to the next gives the same members.
	buf := make(Object, 0, 2)
	for _, in := range []string{`{"id":"1","type":"t","data":{"a":1},"other":2}`, `{"id":"2"}`, `[]`, `{"a":1,"a":2}`} {
		want, wantDup, wantOK := Members([]byte(in))
		got, gotDup, gotOK := names.AppendMembers(buf[:0], []byte(in))
		if !reflect.DeepEqual(got, want) || gotDup != wantDup || gotOK != wantOK {
			t.Errorf("%s: AppendMembers = %v, %q, %v; Members = %v, %q, %v", in, got, gotDup, gotOK, want, wantDup, wantOK)
		}
		if gotOK {
			buf = got
		}
	}
	data := []byte(`{"id":"1","type":"t","data":{}}`)
	if n := testing.AllocsPerRun(100, func() { names.AppendMembers(buf[:0], data) }); n != 0 {
		t.Errorf("AppendMembers into a buffer large enough allocates %v times, want 0", n)
	}
	plain := testing.AllocsPerRun(100, func() { Members(data) })
	known := testing.AllocsPerRun(100, func() { names.Members(data) })
	if known != plain-3 {
		t.Errorf("Names.Members allocates %v times, Members %v: want the three names fewer", known, plain)
	}
}

// asMap returns o's members as a map from name to value.
func asMap(o Object) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(o))
	for _, mb := range o {
		m[mb.Name] = mb.Value
	}
	return m
}
