package natstest

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
)

// ProxiedCluster is an in-process JetStream cluster whose nodes reach one
// another only through TCP proxies: node i dials node j through a proxy of its
// own (one per ordered pair), so that a test can cut a node off from its peers,
// or black-hole its routes, while clients stay connected to every node.
//
// Each node advertises for its routes an address that refuses every
// connection, so that the nodes cannot learn one another's real route ports by
// gossip and bypass the proxies.
type ProxiedCluster struct {
	// Servers are the nodes, n1 first. A test that restarts node i (with
	// [Restart]: same ports, same routes through the same proxies) puts the new
	// server in its place.
	Servers []*server.Server

	links [][]*tcpproxy.Proxy // links[i][j]: the route node i dials to reach node j (nil when i == j)
	sinks []*tcpproxy.Proxy   // sinks[i]: what node i advertises for routes; refuses everything
}

// StartProxiedCluster is [StartCluster] with every route through a proxy (see
// [ProxiedCluster]). It returns once JetStream has a meta leader that sees all
// n peers and every node reports itself current. The servers and proxies are
// closed when the test ends.
func StartProxiedCluster(t testing.TB, n int, opts ...Option) *ProxiedCluster {
	t.Helper()
	if n < 2 {
		t.Fatalf("natstest: a proxied cluster of %d nodes", n)
	}
	base := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := startProxied(filepath.Join(base, fmt.Sprintf("try%d", attempt)), n, opts)
		if err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(c.close)
		return c
	}
	t.Fatalf("natstest: starting a %d-node proxied cluster: %v", n, lastErr)
	return nil
}

func startProxied(dir string, n int, opts []Option) (*ProxiedCluster, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	c := &ProxiedCluster{links: make([][]*tcpproxy.Proxy, n)}
	for i := range n {
		c.links[i] = make([]*tcpproxy.Proxy, n)
		for j := range n {
			if i == j {
				continue
			}
			p, err := tcpproxy.New(fmt.Sprintf("127.0.0.1:%d", ports[j]))
			if err != nil {
				c.closeProxies()
				return nil, err
			}
			c.links[i][j] = p
		}
	}
	// A sink refuses every connection: what a node advertises, and so what
	// gossip would have the others dial.
	for range n {
		p, err := tcpproxy.New("127.0.0.1:1")
		if err != nil {
			c.closeProxies()
			return nil, err
		}
		p.Cut()
		c.sinks = append(c.sinks, p)
	}
	servers, err := startCluster(dir, ports, opts, func(i int, o *server.Options) {
		for j, p := range c.links[i] {
			if j != i {
				o.Routes = append(o.Routes, server.RoutesFromStr("nats-route://"+p.Addr())...)
			}
		}
		o.Cluster.Advertise = c.sinks[i].Addr()
	})
	if err == nil {
		err = WaitClusterReady(servers, clusterTimeout)
		if err != nil {
			Shutdown(servers...)
		}
	}
	if err != nil {
		c.closeProxies()
		return nil, err
	}
	c.Servers = servers
	return c, nil
}

// Link returns the proxy node from dials to reach node to (0-based), for
// partitions finer than [ProxiedCluster.Isolate].
func (c *ProxiedCluster) Link(from, to int) *tcpproxy.Proxy { return c.links[from][to] }

// Isolate cuts node i off from every peer: every route to or from it is reset,
// and so is every new attempt, until [ProxiedCluster.Heal]. Its clients stay
// connected to it.
func (c *ProxiedCluster) Isolate(i int) {
	c.each(i, (*tcpproxy.Proxy).Cut)
}

// Blackhole makes node i's routes drop every byte, both ways, without closing
// anything, until [ProxiedCluster.Heal]: a partition the nodes notice only by
// what stops arriving.
func (c *ProxiedCluster) Blackhole(i int) {
	c.each(i, (*tcpproxy.Proxy).Blackhole)
}

// Heal forwards every route again (routes that dropped bytes are reset, and the
// nodes dial them anew).
func (c *ProxiedCluster) Heal() {
	for i := range c.Servers {
		for j := range c.Servers {
			if i != j {
				c.links[i][j].Restore()
			}
		}
	}
}

// each applies f to every link to or from node i.
func (c *ProxiedCluster) each(i int, f func(*tcpproxy.Proxy)) {
	for j := range c.Servers {
		if j != i {
			f(c.links[i][j])
			f(c.links[j][i])
		}
	}
}

// WaitRoutes waits until every running node has a route to each of the others
// that runs, and returns an error naming the first node that lacks one when
// timeout passes.
func (c *ProxiedCluster) WaitRoutes(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		running := 0
		for _, s := range c.Servers {
			if s.Running() {
				running++
			}
		}
		missing := ""
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			rz, err := s.Routez(nil)
			if err != nil {
				missing = fmt.Sprintf("%s: %v", s.Name(), err)
				break
			}
			peers := map[string]bool{}
			for _, r := range rz.Routes {
				peers[r.RemoteName] = true
			}
			if len(peers) < running-1 {
				missing = fmt.Sprintf("%s routes to %d of %d peers", s.Name(), len(peers), running-1)
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("routes not back after %v: %s", timeout, missing)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// close shuts the servers down and closes the proxies.
func (c *ProxiedCluster) close() {
	Shutdown(c.Servers...)
	c.closeProxies()
}

func (c *ProxiedCluster) closeProxies() {
	for _, row := range c.links {
		for _, p := range row {
			if p != nil {
				_ = p.Close()
			}
		}
	}
	for _, p := range c.sinks {
		_ = p.Close()
	}
}
