package idemkey

import (
	"errors"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

// Codes of the errors of this package that are not canonical's own; [Code] returns
// them, or the [canonical.Error] code for an error in the JSON text.
const (
	// CodeUnderivable: a key argument is absent from the call.
	CodeUnderivable = "key_underivable"
	// CodeNotObject: the arguments are valid JSON but not an object.
	CodeNotObject = "arguments_not_object"
)

var (
	// ErrUnderivable is returned when a key argument is absent from the call's
	// arguments. The returned error names the argument.
	ErrUnderivable = errors.New("idemkey: key underivable")

	// ErrNotObject is returned when the arguments are well-formed JSON but not an
	// object.
	ErrNotObject = errors.New("idemkey: arguments are not a JSON object")
)

// Code returns the stable code string of err: [CodeUnderivable], [CodeNotObject], or
// the Code of the [*canonical.Error] in err's chain (invalid_json, duplicate_member,
// nfc_collision, number_out_of_range, invalid_unicode, too_deep, too_many_values). It returns "" for
// nil and for errors that are none of these.
func Code(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, ErrUnderivable) {
		return CodeUnderivable
	}
	if errors.Is(err, ErrNotObject) {
		return CodeNotObject
	}
	if cerr, ok := errors.AsType[*canonical.Error](err); ok {
		return cerr.Code
	}
	return ""
}
