package kvstore

import "fmt"

// CheckTenant returns an error wrapping [ErrInvalid] unless tenant is a token of
// [A-Za-z0-9_-]{1,128}, the wire's rule (which also keeps it one NATS subject
// token, free of Redis hash-tag braces and of SQL surprises).
func CheckTenant(tenant string) error {
	ok := len(tenant) >= 1 && len(tenant) <= 128
	for i := 0; ok && i < len(tenant); i++ {
		c := tenant[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: tenant %q must match [A-Za-z0-9_-]{1,128}", ErrInvalid, tenant)
	}
	return nil
}

// CheckKey returns an error wrapping [ErrInvalid] unless tenant passes
// [CheckTenant] and digest is 64 lower-case hex digits. Stores call it before
// touching their backend.
func CheckKey(tenant, digest string) error {
	if err := CheckTenant(tenant); err != nil {
		return err
	}
	ok := len(digest) == 64
	for i := 0; ok && i < len(digest); i++ {
		c := digest[i]
		ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("%w: digest %q must be 64 lower-case hex digits", ErrInvalid, digest)
	}
	return nil
}
