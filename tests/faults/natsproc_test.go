package faults_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// The nats-server binary, built once per test run from the module's own
// version (go.mod) of github.com/nats-io/nats-server/v2.
var natsBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// natsServerBinary builds nats-server (once per test run) and returns its
// path. Like the executor, it is built with the race detector when the tests
// are, or when FAULTS_RACE is set: the in-process servers of the other
// scenarios are instrumented too.
func natsServerBinary(t *testing.T) string {
	t.Helper()
	natsBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "toolexec-faults-nats-")
		if err != nil {
			natsBuild.err = err
			return
		}
		natsBuild.dir = dir
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		path := filepath.Join(dir, "nats-server")
		args := []string{"build", "-o", path}
		if testenv.Race || os.Getenv("FAULTS_RACE") != "" {
			args = append(args, "-race")
		}
		args = append(args, "github.com/nats-io/nats-server/v2")
		out, err := exec.Command(goBin, args...).CombinedOutput()
		if err != nil {
			natsBuild.err = fmt.Errorf("go build nats-server: %v\n%s", err, out)
			return
		}
		natsBuild.path = path
	})
	if natsBuild.err != nil {
		t.Fatalf("faults: %v", natsBuild.err)
	}
	return natsBuild.path
}

// natsProc is one nats-server process of a cluster: its configuration file
// names its store directory, ports and routes, so that it can be killed and
// started again as the same node.
type natsProc struct {
	name     string
	conf     string // configuration file
	storeDir string
	logPath  string
	client   int // client port
	http     int // monitoring port

	mu     sync.Mutex // protects cmd and exited
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
}

// URL returns the node's client URL.
func (p *natsProc) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", p.client) }

// startProcCluster writes the configuration of an n-node JetStream cluster
// (every write synced before it is acknowledged) and starts one nats-server
// process per node. It returns once every node is healthy (/healthz: the meta
// group has a leader and the node is current). The processes are killed when
// the test ends; if it failed, the tail of each one's log is logged.
func startProcCluster(t *testing.T, n int) []*natsProc {
	t.Helper()
	bin := natsServerBinary(t)
	ports := freeTCPPorts(t, 3*n)
	dir := t.TempDir()
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3*i+1])
	}
	cluster := fmt.Sprintf("faults-%d", time.Now().UnixNano())
	procs := make([]*natsProc, n)
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		p := &natsProc{
			name: name, conf: filepath.Join(dir, name+".conf"), storeDir: filepath.Join(dir, name),
			logPath: filepath.Join(dir, name+".log"), client: ports[3*i], http: ports[3*i+2],
		}
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream {
  store_dir: %q
  sync_interval: always
}
cluster {
  name: %s
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, name, p.client, p.http, p.storeDir, cluster, ports[3*i+1], strings.Join(routes, ", "))
		if err := os.WriteFile(p.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		procs[i] = p
	}
	for _, p := range procs {
		p.start(t, bin)
		t.Cleanup(func() {
			p.kill()
			if t.Failed() {
				t.Logf("nats-server %s log (tail):\n%s", p.name, tail(p.logPath, 20))
			}
		})
	}
	if err := waitProcsHealthy(procs, time.Minute); err != nil {
		t.Fatal(err)
	}
	return procs
}

// start runs the node's process (appending to its log).
func (p *natsProc) start(t *testing.T, bin string) {
	t.Helper()
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", p.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting nats-server %s: %v", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *natsProc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// running reports whether the node's process is up.
func (p *natsProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// monitor GETs path from the node's monitoring port and decodes the JSON
// answer into v; a status other than 200 is an error carrying the body.
func (p *natsProc) monitor(path string, v any) error {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d%s", p.http, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", p.name, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, v)
}

// jsz returns the node's own JetStream report, with its streams and
// consumers (what replicasOf reads).
func (p *natsProc) jsz() (*server.JSInfo, error) {
	var info server.JSInfo
	if err := p.monitor("/jsz?accounts=true&streams=true&consumers=true&config=true", &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// leads reports whether the node calls itself the leader of stream (of the
// global account), or of the meta group when stream is empty.
func (p *natsProc) leads(stream string) bool {
	if !p.running() {
		return false
	}
	var info server.JSInfo
	if err := p.monitor("/jsz?accounts=true&streams=true", &info); err != nil {
		return false
	}
	if stream == "" {
		return info.Meta != nil && info.Meta.Leader == p.name
	}
	for _, acc := range info.AccountDetails {
		for _, sd := range acc.Streams {
			if sd.Name == stream && sd.Cluster != nil {
				return sd.Cluster.Leader == p.name
			}
		}
	}
	return false
}

// procLeader waits up to timeout for a running node to call itself the leader
// of stream (the meta group when stream is empty) and returns it, or nil.
func procLeader(procs []*natsProc, stream string, timeout time.Duration) *natsProc {
	deadline := time.Now().Add(timeout)
	for {
		for _, p := range procs {
			if p.leads(stream) {
				return p
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitProcsHealthy waits until every running node answers /healthz with ok:
// JetStream's meta group has a leader, and every stream and consumer replica
// the node holds is current.
func waitProcsHealthy(procs []*natsProc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var last error
		for _, p := range procs {
			if !p.running() {
				continue
			}
			var h server.HealthStatus
			if err := p.monitor("/healthz", &h); err != nil {
				last = err
				break
			}
		}
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server cluster not healthy after %v: %w", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procJsz returns a jsz function for waitReplicasAgree over processes.
func procJsz(procs []*natsProc) func() (map[string]*server.JSInfo, error) {
	return func() (map[string]*server.JSInfo, error) {
		out := map[string]*server.JSInfo{}
		for _, p := range procs {
			info, err := p.jsz()
			if err != nil {
				return nil, err
			}
			out[p.name] = info
		}
		return out, nil
	}
}

// freeTCPPorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago.
func freeTCPPorts(t *testing.T, n int) []int {
	t.Helper()
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
