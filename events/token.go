package events

// MaxTokenLen is the longest tenant, tool, run id or call id accepted.
const MaxTokenLen = 128

// ValidToken reports whether s can be a tenant, tool, run id or call id: 1 to
// [MaxTokenLen] bytes, each one of A-Z a-z 0-9 _ -. Such a token is a single NATS
// subject token that is neither a wildcard nor contains a separator.
func ValidToken(s string) bool {
	if len(s) == 0 || len(s) > MaxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte[s[i]] {
			return false
		}
	}
	return true
}

// CheckToken returns nil when value is a valid token ([ValidToken]), or a
// [*TokenError] naming field.
func CheckToken(field, value string) error {
	if ValidToken(value) {
		return nil
	}
	return &TokenError{Field: field, Value: value}
}

// tokenByte marks the bytes a token may hold.
var tokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	t['_'], t['-'] = true, true
	return t
}()

// validKey reports whether s looks like an idempotency key: 64 lower-case hex
// digits, as package idemkey derives them.
func validKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
