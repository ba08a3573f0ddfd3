package pgstore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec/kvstore"
)

// checkText refuses a string PostgreSQL's text type cannot hold (invalid UTF-8 or
// a NUL byte) with kvstore.ErrInvalid.
func checkText(field, v string) error {
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: %s must be UTF-8 without NUL bytes", kvstore.ErrInvalid, field)
	}
	return nil
}

// checkClaimText refuses a ClaimRequest whose text fields the database's text
// columns cannot hold; the contract's own checks are kvstore.ClaimRequest's.
func checkClaimText(req kvstore.ClaimRequest) error {
	for _, f := range []struct{ name, v string }{
		{"holder", req.Holder}, {"check digest", req.CheckDigest}, {"tool", req.Tool},
		{"run id", req.RunID}, {"call id", req.CallID},
	} {
		if err := checkText(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// micros rounds d up to a whole number of microseconds, PostgreSQL's interval
// resolution, so that a positive duration never becomes a zero interval.
func micros(d time.Duration) time.Duration {
	if r := d % time.Microsecond; r != 0 {
		d += time.Microsecond - r
	}
	return d
}
