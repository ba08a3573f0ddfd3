package redisstore

import (
	"fmt"

	"github.com/tesserix/toolexec/kvstore"
)

// validTenant checks tenant against the wire's token rule, [A-Za-z0-9_-]{1,128},
// which also keeps it free of the braces that delimit the hash tag.
func validTenant(op, tenant string) error {
	if err := kvstore.CheckTenant(tenant); err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return nil
}

func validKey(op, tenant, digest string) error {
	if err := kvstore.CheckKey(tenant, digest); err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return nil
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
