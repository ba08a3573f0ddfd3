package bus_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

func TestConnectConfigOptionsRefusals(t *testing.T) {
	tests := []struct {
		name string
		give bus.ConnectConfig
	}{
		{"creds and token", bus.ConnectConfig{CredsFile: "a.creds", Token: "t"}},
		{"nkey and user", bus.ConnectConfig{NKeyFile: "seed", User: "u", Password: "p"}},
		{"user and token", bus.ConnectConfig{User: "u", Token: "t"}},
		{"password without user", bus.ConnectConfig{Password: "p"}},
		{"cert without key", bus.ConnectConfig{TLSCert: "c.pem"}},
		{"key without cert", bus.ConnectConfig{TLSKey: "k.pem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.give.Options(); !errors.Is(err, bus.ErrInvalidConfig) {
				t.Errorf("Options() = %v, want ErrInvalidConfig", err)
			}
			if _, err := bus.Connect(tt.give); !errors.Is(err, bus.ErrInvalidConfig) {
				t.Errorf("Connect() = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := (bus.ConnectConfig{NKeyFile: filepath.Join(t.TempDir(), "missing")}).Options(); err == nil {
		t.Error("a missing nkey seed file was accepted")
	}
}

func TestConnectURLDefault(t *testing.T) {
	s := natstest.Start(t)
	t.Setenv("NATS_URL", s.ClientURL())
	if got := (bus.ConnectConfig{}).URLOrDefault(); got != s.ClientURL() {
		t.Errorf("URLOrDefault = %q, want $NATS_URL", got)
	}
	nc, err := bus.Connect(bus.ConnectConfig{Name: "probe", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedUrl() != s.ClientURL() {
		t.Errorf("connected to %s, want %s", nc.ConnectedUrl(), s.ClientURL())
	}
	if got := (bus.ConnectConfig{URL: "nats://x:1"}).URLOrDefault(); got != "nats://x:1" {
		t.Errorf("URLOrDefault with a URL = %q", got)
	}
}

func TestConnectAuthentication(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		server natstest.Option
		good   bus.ConnectConfig
		bad    bus.ConnectConfig
	}{
		{
			name:   "token",
			server: func(o *server.Options) { o.Authorization = "s3cret" },
			good:   bus.ConnectConfig{Token: "s3cret"},
			bad:    bus.ConnectConfig{Token: "guess"},
		},
		{
			name:   "user and password",
			server: func(o *server.Options) { o.Username, o.Password = "exec", "pw" },
			good:   bus.ConnectConfig{User: "exec", Password: "pw"},
			bad:    bus.ConnectConfig{User: "exec", Password: "nope"},
		},
		{
			name:   "nkey",
			server: func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
			good:   bus.ConnectConfig{NKeyFile: seedFile},
			bad:    bus.ConnectConfig{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := natstest.Start(t, tt.server)
			tt.good.URL, tt.bad.URL = s.ClientURL(), s.ClientURL()
			tt.good.Logger, tt.bad.Logger = testLogger(), testLogger()
			nc, err := bus.Connect(tt.good)
			if err != nil {
				t.Fatalf("good credentials refused: %v", err)
			}
			nc.Close()
			if nc, err := bus.Connect(tt.bad); err == nil {
				nc.Close()
				t.Fatal("bad credentials accepted")
			}
		})
	}
}

// TestConnectTLS connects with a CA file and a client certificate to a server
// that verifies clients.
func TestConnectTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCA(t)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	issue(t, dir, "server", ca, caKey, true)
	issue(t, dir, "client", ca, caKey, false)
	tlsCfg, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"),
		CaFile: filepath.Join(dir, "ca.pem"), Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t, func(o *server.Options) { o.TLSConfig = tlsCfg; o.TLSVerify = true; o.TLSTimeout = 5 })
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)

	nc, err := bus.Connect(bus.ConnectConfig{URL: url, TLSCA: filepath.Join(dir, "ca.pem"),
		TLSCert: filepath.Join(dir, "client.pem"), TLSKey: filepath.Join(dir, "client-key.pem"), Logger: testLogger()})
	if err != nil {
		t.Fatalf("TLS connect: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	nc.Close()
	if nc, err := bus.Connect(bus.ConnectConfig{URL: url, TLSCA: filepath.Join(dir, "ca.pem"), Logger: testLogger()}); err == nil {
		nc.Close()
		t.Error("connected without the client certificate the server requires")
	}
}

// TestConnectReconnects restarts the server under a connection: the connection
// comes back by itself and says so in the log.
func TestConnectReconnects(t *testing.T) {
	s := natstest.Start(t)
	var logs logBuffer
	nc, err := bus.Connect(bus.ConnectConfig{URL: s.ClientURL(), ReconnectWait: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	natstest.Restart(t, s)
	wait.Eventually(t, 15*time.Second, "the reconnection", func() bool {
		return nc.IsConnected() && strings.Contains(logs.String(), "NATS reconnected")
	})
	if !strings.Contains(logs.String(), "NATS disconnected") {
		t.Errorf("the disconnection was not logged: %s", logs.String())
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toolexec test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue writes <name>.pem and <name>-key.pem, a certificate signed by the CA for
// 127.0.0.1 (a server) or for client authentication.
func issue(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, isServer bool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if isServer {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", keyDER)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
