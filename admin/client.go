package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Client sends admin requests to the executors over NATS request-reply. It is
// safe for concurrent use.
type Client struct {
	nc *nats.Conn
}

// NewClient returns a client on nc. It returns an error matching
// ErrInvalidConfig if nc is nil.
func NewClient(nc *nats.Conn) (*Client, error) {
	if nc == nil {
		return nil, invalidConfig("a NATS connection is required")
	}
	return &Client{nc: nc}, nil
}

// List returns the live records of a tenant in one state (indeterminate by
// default), oldest first, with the executor's clock to judge their ages (see
// ListResponse). Errors are as for Forget; a store that cannot list matches
// errors.ErrUnsupported.
func (c *Client) List(ctx context.Context, req ListRequest) (*ListResponse, error) {
	var resp ListResponse
	if err := c.request(ctx, ListSubject, req, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return &resp, nil
}

// Forget asks an executor to erase every record of tenant and purge its calls
// and events from both streams, and returns how many records were erased (-1 if
// the store cannot tell). Errors: ErrNoResponder when no executor answers (or
// the connection's account does not import the admin subjects), an *Error
// (matching kvstore.ErrInvalid, kvstore.ErrUnavailable, ErrForbidden when the
// executors accept requests from another account only, ...), or the request's
// error.
func (c *Client) Forget(ctx context.Context, tenant string) (int64, error) {
	var resp ForgetResponse
	if err := c.request(ctx, ForgetSubject, ForgetRequest{Tenant: tenant}, &resp); err != nil {
		return 0, err
	}
	if resp.Error != nil {
		return resp.Records, resp.Error
	}
	return resp.Records, nil
}

// Inspect returns the record of tenant's key (the 64-hex digest). Errors are as
// for Forget; an unknown key matches kvstore.ErrNotFound.
func (c *Client) Inspect(ctx context.Context, tenant, key string) (*RecordInfo, error) {
	var resp InspectResponse
	if err := c.request(ctx, InspectSubject, InspectRequest{Tenant: tenant, Key: key}, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Record, nil
}

// Resolve settles an indeterminate key and returns its record (see
// ResolveResponse). A key that is not indeterminate matches
// kvstore.ErrNotIndeterminate; a resolution applied whose audit event was not
// stored returns the record with an error matching ErrAuditNotPublished. Other
// errors are as for Forget.
func (c *Client) Resolve(ctx context.Context, req ResolveRequest) (*RecordInfo, error) {
	var resp ResolveResponse
	if err := c.request(ctx, ResolveSubject, req, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return resp.Record, resp.Error
	}
	return resp.Record, nil
}

// request sends req on subject and decodes the reply into resp, waiting at
// most DefaultTimeout when ctx has no deadline.
func (c *Client) request(ctx context.Context, subject string, req, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	m, err := c.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w (%s)", ErrNoResponder, subject)
	}
	if err != nil {
		return fmt.Errorf("admin: request %s: %w", subject, err)
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("admin: reply on %s is not JSON: %w", subject, err)
	}
	return nil
}
