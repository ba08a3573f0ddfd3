package httptool_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
)

// replayServer answers the first request on each connection and hangs up on any
// later one after reading it whole: the request arrived, the answer never does.
type replayServer struct {
	mu       sync.Mutex     // protects the fields below
	perConn  map[string]int // requests seen per remote address
	requests int
}

func (s *replayServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.requests++
	s.perConn[r.RemoteAddr]++
	later := s.perConn[r.RemoteAddr] > 1
	s.mu.Unlock()
	if later {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	io.WriteString(w, "ok")
}

// provokeReplay calls tl until a call lands on a reused connection that the
// server then closes. It returns the calls made, the requests the server saw and
// the error of the call on the reused connection (nil if the transport replayed it
// and the replay succeeded).
func provokeReplay(t *testing.T, kind tool.Kind) (calls, requests int, err error) {
	t.Helper()
	srv := &replayServer{perConn: map[string]int{}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	tr := &http.Transport{} // pooled keep-alive connections
	t.Cleanup(tr.CloseIdleConnections)
	spec := bookSpec
	spec.Idempotency = &tool.Policy{Kind: kind, KeyArguments: []string{"flight"}}
	tl, nerr := httptool.New(spec, httptool.Endpoint{URL: ts.URL, Client: &http.Client{Transport: tr}})
	if nerr != nil {
		t.Fatal(nerr)
	}
	for calls < 50 {
		reused := false
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ctx = httptraceReused(ctx, &reused)
		_, err = tl.Call(ctx, callCtx, json.RawMessage(`{"flight":"BA117"}`))
		cancel()
		calls++
		if reused {
			break
		}
		if err != nil {
			t.Fatalf("call on a fresh connection failed: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // let the connection go back to the pool
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.requests < 2 {
		t.Fatalf("no connection was ever reused in %d calls; the test proves nothing", calls)
	}
	return calls, srv.requests, err
}

func TestEffectfulRequestIsNeverReplayed(t *testing.T) {
	// The harness first shows what it catches: an Idempotent request is replayed
	// by the transport on a new connection, and the call succeeds.
	calls, requests, err := provokeReplay(t, tool.Idempotent)
	if err != nil || requests != calls+1 {
		t.Fatalf("Idempotent: %d calls, %d requests, err %v; want the transport to replay one request", calls, requests, err)
	}
	// An Effectful request that reached the server is never sent again.
	calls, requests, err = provokeReplay(t, tool.Effectful)
	if requests != calls {
		t.Errorf("Effectful: %d calls reached the server as %d requests", calls, requests)
	}
	if err == nil || tool.IsNoEffect(err) {
		t.Errorf("Effectful: err = %v; want a failure with unknown effect", err)
	}
}

func TestEffectfulDefaultClientUsesFreshConnections(t *testing.T) {
	var mu sync.Mutex
	addrs := map[string]bool{}
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		addrs[r.RemoteAddr] = true
		mu.Unlock()
	})
	tl := newTool(t, httptool.Endpoint{URL: url}) // bookSpec is Effectful
	const n = 3
	for range n {
		if _, err := call(t, tl, callCtx, `{"flight":"BA117"}`); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(addrs) != n {
		t.Errorf("%d calls used %d connections; want one each", n, len(addrs))
	}
}
