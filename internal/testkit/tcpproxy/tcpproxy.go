package tcpproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Mode is how a [Proxy] treats traffic.
type Mode int

// The modes a proxy can be in.
const (
	// Forward passes bytes both ways: the proxy is invisible.
	Forward Mode = iota
	// Cut resets every connection, open or new.
	Cut
	// Blackhole accepts and reads, and forwards nothing.
	Blackhole
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case Forward:
		return "forward"
	case Cut:
		return "cut"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// dialTimeout bounds the proxy's connection to its target.
const dialTimeout = 5 * time.Second

// Proxy forwards TCP connections from its own address to a target, until told
// otherwise. Create it with [New] or [Start]; its methods are safe for concurrent
// use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every pump

	mu       sync.Mutex // protects mode, delay, conns, closed and accepted
	mode     Mode
	delay    time.Duration // how long the target's bytes are held (Delay)
	conns    map[*pair]struct{}
	closed   bool
	accepted int
}

// pair is one client connection and, unless it arrived in a black hole, its
// connection to the target.
type pair struct {
	client, server net.Conn // server is nil for a connection accepted in a black hole
	holed          bool     // bytes were dropped: the streams are out of step; guarded by Proxy.mu
	once           sync.Once
}

// New listens on a free port of 127.0.0.1 and forwards every connection to
// target (host:port). The target need not be up yet: a connection that cannot
// reach it is reset. Call Close when done.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*pair]struct{})}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Start is [New] for tests: it fails t if the proxy cannot listen and closes the
// proxy when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr returns the address clients connect to, as host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Accepted returns how many connections the proxy has accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open returns how many connections are open through the proxy.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Cut resets every open connection and, until [Proxy.Restore] or
// [Proxy.Blackhole], every new one as soon as it is accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.mode = Cut
	victims := p.takeLocked(func(*pair) bool { return true })
	p.mu.Unlock()
	for _, c := range victims {
		c.close()
	}
}

// Blackhole stops forwarding: from now on bytes read from either side of an open
// connection are dropped, and new connections are accepted and read but never
// reach the target. Nothing is closed.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.mode = Blackhole
	p.mu.Unlock()
}

// Restore forwards again. Connections that dropped bytes while black-holed, and
// those accepted in the black hole, are reset; connections that stayed quiet
// carry on.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.mode = Forward
	victims := p.takeLocked(func(c *pair) bool { return c.holed })
	p.mu.Unlock()
	for _, c := range victims {
		c.close()
	}
}

// Delay holds every byte the target sends for d before passing it to the
// client, on open connections and new ones, until Delay is called again (zero:
// at once). Bytes keep their order, and what clients send is not delayed: the
// proxy is a slow link, or a server whose answers lag behind its work.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines to end. It returns nil; a second call does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	victims := p.takeLocked(func(*pair) bool { return true })
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range victims {
		c.close()
	}
	p.wg.Wait()
	return nil
}

// takeLocked removes the pairs that match from the set and returns them.
func (p *Proxy) takeLocked(match func(*pair) bool) []*pair {
	var out []*pair
	for c := range p.conns {
		if match(c) {
			out = append(out, c)
			delete(p.conns, c)
		}
	}
	return out
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // a transient accept error
			continue
		}
		p.mu.Lock()
		p.accepted++
		mode, closed := p.mode, p.closed
		p.mu.Unlock()
		switch {
		case closed, mode == Cut:
			reset(conn)
		case mode == Blackhole:
			c := &pair{client: conn, holed: true}
			if p.add(c) {
				p.wg.Add(1)
				go p.pump(c, conn, nil)
			}
		default:
			p.wg.Add(1)
			go p.connect(conn)
		}
	}
}

// connect dials the target for a client accepted while forwarding.
func (p *Proxy) connect(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		reset(client)
		return
	}
	c := &pair{client: client, server: server}
	if !p.add(c) {
		return
	}
	// The mode may have changed while dialling.
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	if mode == Cut {
		p.drop(c)
		return
	}
	p.wg.Add(2)
	go p.pump(c, client, server)
	go p.pumpBack(c, server, client)
}

// add registers c, or closes it and reports false if the proxy is closed.
func (p *Proxy) add(c *pair) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return false
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	return true
}

// drop unregisters c and closes it.
func (p *Proxy) drop(c *pair) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.close()
}

// pump copies from src to dst (dst nil: the connection was accepted in a black
// hole) while forwarding, and drops what it reads while black-holed. When either
// side fails or closes, the pair is closed.
func (p *Proxy) pump(c *pair, src, dst net.Conn) {
	defer p.wg.Done()
	defer p.drop(c)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.forward(c, dst) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a failure: either way the pair is done
			return
		}
	}
}

// forward reports whether bytes just read for c go on to dst, and marks c as
// holed when they are dropped.
func (p *Proxy) forward(c *pair, dst net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	fwd := p.mode == Forward && dst != nil && !c.holed
	if !fwd {
		c.holed = true
	}
	return fwd
}

// delayed is bytes from a target, held until due.
type delayed struct {
	b   []byte
	due time.Time
}

// backChunks bounds the chunks held back per connection; reading from the
// target waits while that many are.
const backChunks = 1024

// pumpBack is pump for the bytes a target sends: each chunk read is held, in
// order, until the delay in force when it was read has passed (see Delay).
func (p *Proxy) pumpBack(c *pair, src, dst net.Conn) {
	defer p.wg.Done()
	held := make(chan delayed, backChunks)
	written := make(chan struct{})
	go p.writeBack(c, dst, held, written)
	defer p.drop(c)
	defer func() { <-written }()
	defer close(held)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.forward(c, dst) {
			p.mu.Lock()
			due := time.Now().Add(p.delay)
			p.mu.Unlock()
			held <- delayed{b: append([]byte(nil), buf[:n]...), due: due}
		}
		if err != nil {
			return
		}
	}
}

// writeBack writes the chunks from held to dst when they are due, and closes
// written when held is closed and drained. After a failed write it closes the
// pair (so that pumpBack's read ends too) and drops the rest.
func (p *Proxy) writeBack(c *pair, dst net.Conn, held <-chan delayed, written chan<- struct{}) {
	defer close(written)
	failed := false
	for k := range held {
		if failed {
			continue
		}
		time.Sleep(time.Until(k.due))
		if _, err := dst.Write(k.b); err != nil {
			failed = true
			p.drop(c)
		}
	}
}

func (c *pair) close() {
	c.once.Do(func() {
		reset(c.client)
		if c.server != nil {
			reset(c.server)
		}
	})
}

// reset closes conn so that the peer sees a reset rather than an orderly end.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
