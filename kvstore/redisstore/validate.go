package redisstore

import (
	"github.com/tesserix/toolexec/kvstore"
)

// maxToken is the longest tenant accepted: the wire's token rule.
const maxToken = 128

// validTenant checks tenant against the wire's token rule, [A-Za-z0-9_-]{1,128},
// which also keeps it free of the braces that delimit the hash tag.
func validTenant(op, tenant string) error {
	if tenant == "" || len(tenant) > maxToken {
		return errf(op, kvstore.ErrInvalid, "tenant %q must be 1 to %d characters", tenant, maxToken)
	}
	for i := 0; i < len(tenant); i++ {
		c := tenant[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errf(op, kvstore.ErrInvalid, "tenant %q: only A-Z a-z 0-9 _ - are allowed", tenant)
		}
	}
	return nil
}

// validDigest checks that digest is 64 lower-case hex digits.
func validDigest(op, digest string) error {
	if len(digest) != 64 {
		return errf(op, kvstore.ErrInvalid, "digest %q must be 64 lower-case hex digits", digest)
	}
	for i := 0; i < len(digest); i++ {
		c := digest[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return errf(op, kvstore.ErrInvalid, "digest %q must be 64 lower-case hex digits", digest)
		}
	}
	return nil
}

func validKey(op, tenant, digest string) error {
	if err := validTenant(op, tenant); err != nil {
		return err
	}
	return validDigest(op, digest)
}

func validClaim(op string, req kvstore.ClaimRequest) error {
	if err := validKey(op, req.Tenant, req.Digest); err != nil {
		return err
	}
	if req.Holder == "" {
		return errf(op, kvstore.ErrInvalid, "empty holder")
	}
	if req.Lease <= 0 {
		return errf(op, kvstore.ErrInvalid, "lease %v must be positive", req.Lease)
	}
	return nil
}

func validLease(op string, l kvstore.Lease) error {
	if err := validKey(op, l.Tenant, l.Digest); err != nil {
		return err
	}
	if l.Holder == "" || l.Token == "" {
		return errf(op, kvstore.ErrInvalid, "lease without holder or token")
	}
	return nil
}
