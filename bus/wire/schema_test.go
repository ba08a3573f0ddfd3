package wire_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

func TestValidate(t *testing.T) {
	type tc struct {
		data string
		ok   bool
	}
	k64 := `"` + key + `"`
	tests := map[events.Kind][]tc{
		events.KindCompleted: {
			{`{"tool":"book","outcome":"x"}`, true},
			{`{"tool":"book","outcome":""}`, true},
			{`{"tool":"book"}`, false},                             // missing outcome
			{`{"outcome":"x"}`, false},                             // missing tool
			{`{"tool":"book","outcome":{"seat":"12A"}}`, false},    // outcome must be a string
			{`{"tool":"book","outcome":null}`, false},              // null is not a string
			{`{"tool":"bo.ok","outcome":"x"}`, false},              // tool not a token
			{`{"tool":"","outcome":"x"}`, false},                   // empty tool
			{`{"tool":"book","outcome":"x","error":"e"}`, false},   // member of another kind
			{`{"tool":"book","outcome":"x","Outcome":"y"}`, false}, // names are case-sensitive
			{`["book","x"]`, false},                                // not an object
			{`{"tool":"book","outcome":"x"`, false},                // not JSON
			{``, false},                                            // nothing
		},
		events.KindDeduplicated: {
			{`{"tool":"book","outcome":"x"}`, true},
			{`{"tool":"book"}`, false},
			{`{"tool":1,"outcome":"x"}`, false},
		},
		events.KindIndeterminate: {
			{`{"tool":"book","reason":"body_failed","body_entered":true}`, true},
			{`{"tool":"book","reason":"timeout","body_entered":true,"error":"deadline"}`, true},
			{`{"tool":"book","reason":"store_unavailable","body_entered":false}`, true},
			{`{"tool":"book","reason":"crashed","body_entered":true}`, false},  // unknown reason
			{`{"tool":"book","reason":"Timeout","body_entered":true}`, false},  // enum is exact
			{`{"tool":"book","body_entered":true}`, false},                     // missing reason
			{`{"tool":"book","reason":"timeout"}`, false},                      // missing body_entered
			{`{"tool":"book","reason":"timeout","body_entered":"yes"}`, false}, // not a boolean
			{`{"tool":"book","reason":"timeout","body_entered":1}`, false},     // not a boolean
			{`{"tool":"book","reason":"timeout","body_entered":true,"outcome":"x"}`, false},
		},
		events.KindFailed: {
			{`{"tool":"book","error":"boom","code":"tool_error"}`, true},
			{`{"tool":"book","error":"boom","code":"no_effect"}`, true},
			{`{"tool":"book","error":"","code":"timeout"}`, false},       // empty error
			{`{"tool":"book","code":"timeout"}`, false},                  // missing error
			{`{"tool":"book","error":"boom"}`, false},                    // missing code
			{`{"tool":"book","error":"boom","code":"bad_token"}`, false}, // a rejection code
			{`{"tool":"book","error":["boom"],"code":"timeout"}`, false},
		},
		events.KindRejected: {
			{`{"error":"bad","code":"invalid_json"}`, true},
			{`{"tool":"","error":"bad","code":"unknown_tool"}`, true},
			{`{"tool":"book","error":"bad","code":"schema_violation","field":"/arguments/a"}`, true},
			{`{"tool":"book","error":"bad","code":"tool_error"}`, false}, // a failure code
			{`{"tool":"book","error":"bad","code":"nope"}`, false},
			{`{"tool":"book","code":"bad_data"}`, false},
			{`{"tool":"a b","error":"bad","code":"bad_token"}`, false},
			{`{"error":"bad","code":"bad_token","field":7}`, false},
		},
		events.KindResolved: {
			{`{"key":` + k64 + `,"action":"release"}`, true},
			{`{"tool":"book","key":` + k64 + `,"action":"complete","outcome":"","operator":"alice"}`, true},
			{`{"key":` + k64 + `,"action":"complete"}`, false},                   // complete needs an outcome
			{`{"key":` + k64 + `,"action":"release","outcome":"x"}`, false},      // release has none
			{`{"key":` + k64 + `,"action":"undo"}`, false},                       // unknown action
			{`{"action":"release"}`, false},                                      // missing key
			{`{"key":"ABC","action":"release"}`, false},                          // not a key
			{`{"key":"` + strings.ToUpper(key) + `","action":"release"}`, false}, // upper-case hex
		},
	}
	for kind, cases := range tests {
		for _, c := range cases {
			t.Run(string(kind)+"/"+c.data, func(t *testing.T) {
				err := wire.Validate(kind, []byte(c.data))
				if c.ok {
					if err != nil {
						t.Fatalf("Validate = %v, want nil", err)
					}
					return
				}
				if !errors.Is(err, wire.ErrInvalidData) {
					t.Fatalf("Validate = %v, want ErrInvalidData", err)
				}
			})
		}
	}
	for _, k := range events.Kinds() {
		if _, ok := tests[k]; !ok {
			t.Errorf("no validation cases for kind %q", k)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	if err := wire.Validate("done", []byte(`{}`)); !errors.Is(err, events.ErrUnknownKind) {
		t.Errorf("Validate(unknown kind) = %v, want ErrUnknownKind", err)
	}
	err := wire.Validate(events.KindFailed, []byte(`{"tool":"book","error":"boom","code":"oops"}`))
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		t.Errorf("Validate error %v does not wrap the validator's *ValidationError", err)
	}
	if !strings.Contains(err.Error(), "/code") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q should name /code on one line", err)
	}
	if err := wire.ValidateCall([]byte(`{"arguments":{"a":[1,{"b":null}]}}`)); err != nil {
		t.Errorf("ValidateCall(valid) = %v", err)
	}
	if err := wire.ValidateCall([]byte(`{"arguments":[]}`)); !errors.Is(err, wire.ErrInvalidData) {
		t.Errorf("ValidateCall(array arguments) = %v, want ErrInvalidData", err)
	}
}

// TestValidateConcurrently exercises the lazy, once-only compilation and the
// shared compiled schemas from many goroutines (run with -race).
func TestValidateConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := events.Kinds()[i%len(events.Kinds())]
			good := map[events.Kind]string{
				events.KindCompleted:     `{"tool":"t","outcome":"o"}`,
				events.KindDeduplicated:  `{"tool":"t","outcome":"o"}`,
				events.KindIndeterminate: `{"tool":"t","reason":"holder_lost","body_entered":false}`,
				events.KindFailed:        `{"tool":"t","error":"e","code":"timeout"}`,
				events.KindRejected:      `{"error":"e","code":"too_large"}`,
				events.KindResolved:      `{"key":"` + key + `","action":"release"}`,
			}[k]
			if err := wire.Validate(k, []byte(good)); err != nil {
				errs <- err
			}
			if err := wire.Validate(k, []byte(`{"tool":7}`)); err == nil {
				errs <- errors.New("bad data accepted for " + string(k))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
