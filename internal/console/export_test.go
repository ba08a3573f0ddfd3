package console

import "time"

// SetClock makes the console read the time from now. Call it before serving.
func (c *Console) SetClock(now func() time.Time) { c.now = now }

// Sessions returns how many sessions the console keeps, live or not yet swept.
func (c *Console) Sessions() int {
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	return len(c.sessions.byID)
}
