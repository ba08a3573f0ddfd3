package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
)

// clusterNodes is the size of the production-shape cluster, and the replicas
// of every stream and bucket made on it.
const clusterNodes = 3

// Timeouts of the cluster's life: a node accepting connections, the cluster
// electing its meta leader, a restarted node catching up.
const (
	nodeReadyTimeout  = 30 * time.Second
	clusterUpTimeout  = 60 * time.Second
	clusterCurrentMax = 2 * time.Minute
)

// natsCluster is a three-node JetStream cluster inside this process, on
// loopback: each node has its own store directory and its own client and route
// ports from the benchmark's range, and routes to the other two.
//
// A cluster started with linked routes has a TCP proxy on every route, one per
// ordered pair of nodes (links[i][j]: what node i dials to reach node j), and
// each node advertises for routes an address that refuses every connection, so
// that gossip cannot teach the nodes one another's real ports. Cutting a
// node's links before it stops makes a crash of the stop: its raft groups
// cannot hand their leaderships over, and its peers see every route reset at
// once, as when its process is killed.
type natsCluster struct {
	nodes []*clusterNode
	links [][]*tcpproxy.Proxy // nil without linked routes; links[i][i] is nil
	sinks []*tcpproxy.Proxy   // what each node advertises for routes
}

// clusterNode is one node and the options it was started with, kept so that
// it can be started again on the same ports with the same data.
type clusterNode struct {
	opts *server.Options
	srv  *server.Server
}

// startCluster starts a cluster for one configuration, fsync before every
// acknowledgement (syncAlways) or every two minutes, its routes through proxies
// when linked (see natsCluster), and returns it once JetStream has a meta
// leader that every node follows.
func (h *harness) startCluster(name string, syncAlways, linked bool) (*natsEnv, error) {
	dir := h.storeDir(name)
	ports := make([]int, 0, 2*clusterNodes)
	for range 2 * clusterNodes {
		p, err := h.freePort()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	clientPorts, routePorts := ports[:clusterNodes], ports[clusterNodes:]
	routes := make([]string, clusterNodes)
	for i, p := range routePorts {
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(p)
	}
	c := &natsCluster{}
	if linked {
		if err := c.link(routePorts); err != nil {
			c.stop()
			return nil, err
		}
	}
	for i := range clusterNodes {
		o := &server.Options{
			ServerName: fmt.Sprintf("%s-n%d", name, i+1),
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: routePorts[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}
		if c.links != nil {
			o.Routes = nil
			for j, p := range c.links[i] {
				if j != i {
					o.Routes = append(o.Routes, server.RoutesFromStr("nats-route://"+p.Addr())...)
				}
			}
			o.Cluster.Advertise = c.sinks[i].Addr()
		}
		if syncAlways {
			o.SyncAlways = true
		} else {
			o.SyncInterval = lazySync
		}
		n := &clusterNode{opts: o}
		if err := n.start(); err != nil {
			c.stop()
			return nil, fmt.Errorf("cluster node %s: %w", o.ServerName, err)
		}
		c.nodes = append(c.nodes, n)
	}
	if err := c.waitCurrent(clusterUpTimeout); err != nil {
		c.stop()
		return nil, err
	}
	return &natsEnv{cluster: c, url: c.urls(), dir: dir, syncAlways: syncAlways, replicas: clusterNodes}, nil
}

// link puts a proxy on every route between the nodes whose route ports are
// given, and makes each node's sink.
func (c *natsCluster) link(routePorts []int) error {
	n := len(routePorts)
	c.links = make([][]*tcpproxy.Proxy, n)
	for i := range n {
		c.links[i] = make([]*tcpproxy.Proxy, n)
		for j := range n {
			if i == j {
				continue
			}
			p, err := tcpproxy.New("127.0.0.1:" + strconv.Itoa(routePorts[j]))
			if err != nil {
				return err
			}
			c.links[i][j] = p
		}
		sink, err := tcpproxy.New("127.0.0.1:1")
		if err != nil {
			return err
		}
		sink.Cut()
		c.sinks = append(c.sinks, sink)
	}
	return nil
}

// crash stops the node as a killed process would leave its peers: with linked
// routes, every route to or from it is reset first (and stays refused until
// heal), so that its leaderships are not handed over; without them, it is
// Shutdown's graceful stop.
func (c *natsCluster) crash(n *clusterNode) {
	if i := slices.Index(c.nodes, n); c.links != nil && i >= 0 {
		for j := range c.nodes {
			if j != i {
				c.links[i][j].Cut()
				c.links[j][i].Cut()
			}
		}
	}
	n.kill()
}

// heal forwards every route again, for a node started after a crash.
func (c *natsCluster) heal() {
	for i, row := range c.links {
		for j, p := range row {
			if i != j {
				p.Restore()
			}
		}
	}
}

// start starts the node with its options (a copy: the server changes them)
// and waits until it accepts connections.
func (n *clusterNode) start() error {
	s, err := server.NewServer(n.opts.Clone())
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(nodeReadyTimeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return fmt.Errorf("not ready after %v", nodeReadyTimeout)
	}
	n.srv = s
	return nil
}

// kill stops the node with nats-server's Shutdown: its connections and routes
// drop, after it has handed the leaderships of its raft groups over (as on a
// SIGTERM). Its store directory stays for restart.
func (n *clusterNode) kill() {
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// name is the node's server name, as stream and consumer info report leaders.
func (n *clusterNode) name() string { return n.opts.ServerName }

// running reports whether the node is up.
func (n *clusterNode) running() bool { return n.srv != nil && n.srv.Running() }

// urls is the client URL of every node, comma-separated, as clients dial a
// cluster.
func (c *natsCluster) urls() string {
	us := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		us[i] = fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port)
	}
	return strings.Join(us, ",")
}

// node returns the node named name, or nil.
func (c *natsCluster) node(name string) *clusterNode {
	for _, n := range c.nodes {
		if n.name() == name {
			return n
		}
	}
	return nil
}

// stop stops every node still running and closes the route proxies.
func (c *natsCluster) stop() {
	for _, n := range c.nodes {
		if n.running() {
			n.kill()
		}
	}
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

// waitCurrent waits until the running nodes agree on a JetStream meta leader
// that counts each of them as a peer and every running node passes its health
// check (its meta group and every stream and consumer replica it holds are
// current), or timeout passes.
func (c *natsCluster) waitCurrent(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.current()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not current after %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// current returns nil when the running nodes have a meta leader that knows
// them all and each is healthy, else what is missing.
func (c *natsCluster) current() error {
	running, leaders := 0, 0
	var peers int
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		running++
		if n.srv.JetStreamIsLeader() {
			leaders++
			peers = len(n.srv.JetStreamClusterPeers())
		}
	}
	if leaders != 1 || peers < running {
		return errors.New("no meta leader that knows every running node")
	}
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		if hs := n.srv.Healthz(nil); hs.Status != "ok" {
			return fmt.Errorf("%s: %s %s", n.name(), hs.Status, hs.Error)
		}
	}
	return nil
}

// leaderOf returns the name of the running node that leads the stream (or, with
// a consumer name, the consumer) of the global account, or "".
func (c *natsCluster) leaderOf(stream, consumer string) string {
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		if consumer == "" && n.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) ||
			consumer != "" && n.srv.JetStreamIsConsumerLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream, consumer) {
			return n.name()
		}
	}
	return ""
}

// timeToLeader polls every few milliseconds, from since, until a running node
// other than gone leads the stream (or the consumer), and returns when it
// first did; zero if none did by timeout.
func (c *natsCluster) timeToLeader(since time.Time, gone, stream, consumer string, timeout time.Duration) time.Duration {
	for time.Since(since) < timeout {
		if l := c.leaderOf(stream, consumer); l != "" && l != gone {
			return time.Since(since)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0
}
