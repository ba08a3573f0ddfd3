package canonical_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

// FuzzCanonicalize checks, for any input: no panic; an error is always an *Error
// with a known code and an offset within the input; an input encoding/json finds
// valid is never refused as a syntax error; and an accepted input gives a canonical,
// valid JSON output with the input's meaning (see checkOutput).
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,{"d":2.0,"c":null}],"a":false}`,
		`{"\ue000":1,"\ud83d\ude00":2}`,
		`"\u0007\t\"\\/\u20ac"`,
		`[0.1,1e-7,4.50,333333333.33333329,-0.0,1e21,9007199254740993]`,
		`{"\u00e9":1,"e\u0301":2}`,
		`{"a":1,"a":2}`,
		`"\ud800"`,
		`1e999999999`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"e\u0301":["x",{"n":12345678901234567890,"f":1.50e3,"t":true,"z":null}],"o":{},"a":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := canonical.Canonicalize(raw)
		if err != nil {
			var cerr *canonical.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v is %T, not *canonical.Error", err, err)
			}
			switch cerr.Code {
			case canonical.CodeInvalidJSON, canonical.CodeDuplicateMember, canonical.CodeNFCCollision,
				canonical.CodeNumberOutOfRange, canonical.CodeInvalidUnicode, canonical.CodeTooDeep:
			default:
				t.Fatalf("unknown code %q", cerr.Code)
			}
			if cerr.Offset < 0 || cerr.Offset > len(raw) {
				t.Fatalf("offset %d outside the input of %d bytes", cerr.Offset, len(raw))
			}
			if cerr.Code == canonical.CodeInvalidJSON && json.Valid(raw) {
				t.Fatalf("encoding/json accepts %q, but it was refused as invalid JSON: %v", raw, err)
			}
			if out != nil {
				t.Fatalf("output %q returned with error", out)
			}
			return
		}
		checkOutput(t, raw, out)
		appended, err := canonical.AppendCanonical([]byte("x"), raw)
		if err != nil || !bytes.Equal(appended[1:], out) {
			t.Fatalf("AppendCanonical = %q, %v; Canonicalize = %q", appended, err, out)
		}
		if obj, err := canonical.ParseObject(raw, canonical.Limits{}); err == nil {
			if !bytes.Equal(obj.Bytes(), out) {
				t.Fatalf("ParseObject = %q, Canonicalize = %q", obj.Bytes(), out)
			}
			checkObject(t, obj)
			checkValue(t, raw, obj)
		} else if !errors.Is(err, canonical.ErrNotObject) || out[0] == '{' {
			t.Fatalf("ParseObject error %v for %q", err, out)
		}
	})
}

// checkObject checks that an Object's members reassemble into its bytes, in order,
// and can each be found by name.
func checkObject(t *testing.T, obj *canonical.Object) {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range obj.Len() {
		if i > 0 {
			b.WriteByte(',')
			if canonical.CompareNames(obj.Name(i-1), obj.Name(i)) >= 0 {
				t.Fatalf("members %q and %q out of order", obj.Name(i-1), obj.Name(i))
			}
		}
		b.Write(obj.Member(i))
		if !bytes.HasSuffix(obj.Member(i), obj.Value(i)) {
			t.Fatalf("member %q does not end with its value %q", obj.Member(i), obj.Value(i))
		}
		if got := obj.Index(obj.Name(i)); got != i {
			t.Fatalf("Index(%q) = %d, want %d", obj.Name(i), got, i)
		}
	}
	b.WriteByte('}')
	if !bytes.Equal(b.Bytes(), obj.Bytes()) {
		t.Fatalf("members reassemble to %q, want %q", b.Bytes(), obj.Bytes())
	}
}

// checkValue checks that ParseObjectValue gives the object ParseObject gives and,
// in the same pass, the value encoding/json decodes (with UseNumber) from raw.
func checkValue(t *testing.T, raw []byte, obj *canonical.Object) {
	t.Helper()
	got, value, err := canonical.ParseObjectValue(raw, canonical.Limits{})
	if err != nil {
		t.Fatalf("ParseObjectValue: %v, but ParseObject accepted %q", err, raw)
	}
	if !bytes.Equal(got.Bytes(), obj.Bytes()) {
		t.Fatalf("ParseObjectValue = %q, ParseObject = %q", got.Bytes(), obj.Bytes())
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var want any
	if err := d.Decode(&want); err != nil {
		t.Fatalf("encoding/json refuses %q: %v", raw, err)
	}
	if !reflect.DeepEqual(any(value), want) {
		t.Fatalf("value of %q:\n got %#v\nwant %#v", raw, value, want)
	}
}
