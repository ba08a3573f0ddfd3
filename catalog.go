package toolexec

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// Tools returns the declarations of the tools the executors serve, sorted by
// name, as they answer on toolexec.tools.<tenant> (bus.CatalogService), page
// after page: what an agent may call, and what repeating each call does. It
// waits at most bus.DefaultHistoryTimeout when ctx has no deadline. Errors:
// one matching events.ErrInvalidToken for a malformed tenant,
// ErrNoCatalogService when nothing answers (no executor runs, or the account
// does not import the subject), a *bus.CatalogError from the service, or the
// request's error.
func (c *Client) Tools(ctx context.Context, tenant string) ([]bus.ToolDecl, error) {
	if err := events.CheckToken("tenant", tenant); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bus.DefaultHistoryTimeout)
		defer cancel()
	}
	subject := wire.CatalogSubject(tenant)
	var all []bus.ToolDecl
	var req bus.CatalogRequest
	for {
		data, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("toolexec: catalog request: %w", err)
		}
		m, err := c.nc.RequestWithContext(ctx, subject, data)
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("%w on %s", ErrNoCatalogService, subject)
		}
		if err != nil {
			return nil, fmt.Errorf("toolexec: catalog request on %s: %w", subject, err)
		}
		var resp bus.CatalogResponse
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			return nil, fmt.Errorf("toolexec: catalog reply on %s is not the JSON expected: %w", subject, err)
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		for _, d := range resp.Tools {
			if d.Name <= req.After || (len(all) > 0 && d.Name <= all[len(all)-1].Name) {
				return nil, fmt.Errorf("toolexec: catalog reply on %s is out of order at tool %q", subject, d.Name)
			}
			all = append(all, d)
		}
		if !resp.More || len(resp.Tools) == 0 {
			return all, nil
		}
		req.After = resp.Tools[len(resp.Tools)-1].Name
	}
}
