package console

import "time"

// SetClock makes the console read the time from now. Call it before serving.
func (c *Console) SetClock(now func() time.Time) { c.now = now }

// LimitAddresses makes the throttle remember at most n addresses. Call it
// before serving.
func (c *Console) LimitAddresses(n int) { c.gate.lim.maxAddrs = n }

// Sessions returns how many sessions the console keeps, live or not yet swept.
func (c *Console) Sessions() int {
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	return len(c.sessions.byID)
}

// ThrottledAddresses returns how many addresses the throttle remembers.
func (c *Console) ThrottledAddresses() int {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	return len(c.gate.addrs)
}

// Throttle defaults, for the tests to reason with.
var (
	FailureBudget = defaultLimits.budget
	FirstLockout  = defaultLimits.firstLock
	MaxLockout    = defaultLimits.maxLock
	QuietPeriod   = defaultLimits.quiet
	GlobalBurst   = defaultLimits.globalMax
	GlobalRate    = float64(defaultLimits.globalRate)
	MaxAddresses  = defaultLimits.maxAddrs
)
