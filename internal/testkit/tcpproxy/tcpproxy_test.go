package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
)

// echoServer answers every line with the same line, and counts the lines it saw.
func echoServer(t *testing.T) (addr string, lines <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	seen := make(chan string, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					seen <- strings.TrimSpace(line)
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), seen
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and reads the echo, giving up after wait.
func (cl *client) roundTrip(line string, wait time.Duration) (string, error) {
	_ = cl.c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(cl.c, line+"\n"); err != nil {
		return "", err
	}
	got, err := cl.r.ReadString('\n')
	return strings.TrimSpace(got), err
}

// wantReset connects to addr and fails the test unless the connection is
// refused or reset (at connect time or on the first round trip) rather than left
// hanging.
func wantReset(t *testing.T, addr, what string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		defer c.Close()
		cl := &client{c: c, r: bufio.NewReader(c)}
		_, err = cl.roundTrip("x", 5*time.Second)
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: got %v, want a reset", what, err)
	}
}

func mustEcho(t *testing.T, cl *client, line string) {
	t.Helper()
	got, err := cl.roundTrip(line, 5*time.Second)
	if err != nil || got != line {
		t.Fatalf("round trip %q: got %q, %v", line, got, err)
	}
}

func noLine(t *testing.T, lines <-chan string) {
	t.Helper()
	select {
	case l := <-lines:
		t.Fatalf("the server received %q through a proxy that should not forward", l)
	default:
	}
}

func TestForward(t *testing.T) {
	addr, lines := echoServer(t)
	p := tcpproxy.Start(t, addr)
	if p.Mode() != tcpproxy.Forward || p.Target() != addr {
		t.Fatalf("new proxy: mode %v target %s", p.Mode(), p.Target())
	}
	cl := dial(t, p.Addr())
	mustEcho(t, cl, "hello")
	mustEcho(t, cl, "again")
	if l := <-lines; l != "hello" {
		t.Fatalf("server saw %q", l)
	}
	if p.Accepted() != 1 {
		t.Fatalf("Accepted = %d, want 1", p.Accepted())
	}
}

func TestCutResetsOpenAndNewConnections(t *testing.T) {
	addr, _ := echoServer(t)
	p := tcpproxy.Start(t, addr)
	cl := dial(t, p.Addr())
	mustEcho(t, cl, "before")

	p.Cut()
	if _, err := cl.roundTrip("during", 5*time.Second); err == nil {
		t.Fatal("an open connection still worked after Cut")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after Cut the open connection hung instead of failing: %v", err)
	}
	wantReset(t, p.Addr(), "a new connection during Cut")

	p.Restore()
	mustEcho(t, dial(t, p.Addr()), "after")
}

func TestBlackholeDropsAndRestoreRecovers(t *testing.T) {
	addr, lines := echoServer(t)
	p := tcpproxy.Start(t, addr)
	quiet := dial(t, p.Addr())
	mustEcho(t, quiet, "quiet")
	<-lines
	busy := dial(t, p.Addr())
	mustEcho(t, busy, "busy")
	<-lines

	p.Blackhole()
	// The write succeeds (the proxy reads it) but no answer ever comes.
	if _, err := busy.roundTrip("lost", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("black-holed round trip: got %v, want a timeout", err)
	}
	// New connections are accepted, and hang the same way.
	holed := dial(t, p.Addr())
	if _, err := holed.roundTrip("lost too", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection in the black hole: got %v, want a timeout", err)
	}
	time.Sleep(50 * time.Millisecond)
	noLine(t, lines)

	p.Restore()
	// Connections that lost bytes are reset; the quiet one carries on.
	if _, err := busy.roundTrip("stale", 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection that lost bytes: got %v after Restore, want a reset", err)
	}
	if _, err := holed.roundTrip("stale", 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection accepted in the black hole: got %v after Restore, want a reset", err)
	}
	mustEcho(t, quiet, "still here")
	mustEcho(t, dial(t, p.Addr()), "fresh")
	noLine(t, filterOut(lines, "still here", "fresh"))
}

// filterOut drains lines and returns a channel with whatever is left after
// removing the expected ones.
func filterOut(lines <-chan string, expected ...string) <-chan string {
	left := make(chan string, 100)
	want := map[string]bool{}
	for _, e := range expected {
		want[e] = true
	}
	for {
		select {
		case l := <-lines:
			if !want[l] {
				left <- l
			}
		default:
			return left
		}
	}
}

// TestDelayHoldsWhatTheTargetSends: with a delay, what the client sends
// reaches the server at once, and the server's answers come back in order but
// no sooner than the delay; without one they come back at once again.
func TestDelayHoldsWhatTheTargetSends(t *testing.T) {
	addr, lines := echoServer(t)
	p := tcpproxy.Start(t, addr)
	cl := dial(t, p.Addr())
	const delay = 500 * time.Millisecond
	p.Delay(delay)
	for _, l := range []string{"one", "two", "three"} {
		if _, err := io.WriteString(cl.c, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	_ = cl.c.SetReadDeadline(time.Now().Add(delay / 2))
	if got, err := cl.r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an answer came before the delay: %q, %v", got, err)
	}
	if l := <-lines; l != "one" {
		t.Fatalf("server saw %q first", l)
	}
	_ = cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for _, want := range []string{"one", "two", "three"} {
		got, err := cl.r.ReadString('\n')
		if err != nil || strings.TrimSpace(got) != want {
			t.Fatalf("delayed answer: got %q, %v; want %q", got, err, want)
		}
	}
	p.Delay(0)
	mustEcho(t, cl, "prompt")
}

func TestUnreachableTargetResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	p := tcpproxy.Start(t, dead)
	wantReset(t, p.Addr(), "a proxy to a dead target")
}

func TestCloseEndsEverything(t *testing.T) {
	addr, _ := echoServer(t)
	p, err := tcpproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	cl := dial(t, p.Addr())
	mustEcho(t, cl, "x")
	done := make(chan struct{})
	go func() { _ = p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if _, err := cl.roundTrip("y", 5*time.Second); err == nil {
		t.Fatal("connection survived Close")
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = c.Close()
		t.Fatal("the proxy still listens after Close")
	}
	if p.Open() != 0 {
		t.Fatalf("Open = %d after Close", p.Open())
	}
	_ = p.Close() // a second Close is harmless
}

func TestModeString(t *testing.T) {
	for _, tt := range []struct {
		give tcpproxy.Mode
		want string
	}{
		{tcpproxy.Forward, "forward"}, {tcpproxy.Cut, "cut"}, {tcpproxy.Blackhole, "blackhole"}, {tcpproxy.Mode(9), "Mode(9)"},
	} {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", int(tt.give), got, tt.want)
		}
	}
}
