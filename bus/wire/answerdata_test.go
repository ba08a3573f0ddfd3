package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/tesserix/toolexec/events"
)

// strictAnswerData is how answer data was read before readAnswerData: the
// schema over the bytes, then the bytes decoded again into the struct,
// refusing unknown members. FuzzReadAnswerData holds the two to the same
// verdicts and values.
func strictAnswerData(kind events.Kind, data []byte) (answerData, error) {
	if err := Validate(kind, data); err != nil {
		return answerData{}, err
	}
	var d answerData
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return answerData{}, fmt.Errorf("decode data: %w", err)
	}
	return d, nil
}

// FuzzReadAnswerData feeds arbitrary data, as any kind's, to readAnswerData and
// to strictAnswerData: both refuse it or both read the same answerData.
func FuzzReadAnswerData(f *testing.F) {
	for _, seed := range []struct {
		kind int
		data string
	}{
		{0, `{"tool":"book","outcome":"VGUQR2"}`},
		{0, `{"tool":"book","outcome":""}`},
		{0, `{"tool":"book","outcome":null}`},
		{0, `{"tool":"book","outcome":"a","outcome":"b"}`},
		{0, `{"tool":"book","outcome":"a","extra":1}`},
		{0, `{"tool":"book","outcome":"a"} {}`},
		{1, `{"tool":"book","outcome":"x","key":"` + fmt.Sprintf("%064x", 7) + `"}`},
		{2, `{"tool":"book","reason":"timeout","body_entered":true,"error":"read tcp: i/o timeout"}`},
		{2, `{"tool":"book","reason":"timeout","body_entered":"yes"}`},
		{3, `{"tool":"book","code":"tool_error","error":"boom"}`},
		{4, `{"code":"invalid_arguments","error":"seats: want integer","field":"/seats"}`},
		{5, `{"key":"` + fmt.Sprintf("%064x", 7) + `","action":"complete","outcome":"ok","operator":"ops@acme"}`},
		{5, `{"key":"` + fmt.Sprintf("%064x", 7) + `","action":"release","operator":"ops@acme"}`},
		{0, `[]`},
		{0, `"text"`},
		{0, ``},
	} {
		f.Add(seed.kind, []byte(seed.data))
	}
	kinds := []events.Kind{events.KindCompleted, events.KindDeduplicated, events.KindIndeterminate, events.KindFailed, events.KindRejected, events.KindResolved}
	f.Fuzz(func(t *testing.T, k int, data []byte) {
		kind := kinds[uint(k)%uint(len(kinds))]
		got, gotErr := readAnswerData(kind, data)
		want, wantErr := strictAnswerData(kind, data)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%s %q: readAnswerData error %v, strict decoding %v", kind, data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %q: readAnswerData %+v, strict decoding %+v", kind, data, got, want)
		}
	})
}
