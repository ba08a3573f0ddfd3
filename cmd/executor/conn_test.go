package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec/internal/app/natsflags"
	"github.com/tesserix/toolexec/internal/buildinfo"
)

// TestConnectionFlags: the executor takes the connection flags by the nats
// CLI's names and by its old ones, and each option from the flag, then its
// TOOLEXEC_* variable, then the NATS_* one, then a named context; never from
// the context the nats CLI has selected.
func TestConnectionFlags(t *testing.T) {
	home := t.TempDir()
	ctxDir := filepath.Join(home, ".config", "nats", "context")
	if err := os.MkdirAll(ctxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "prod.json"), []byte(`{"url":"nats://prod:4222","creds":"~/exec.creds"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "nats", "context.txt"), []byte("prod"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		want     natsflags.Values
		embedded bool
	}{
		{"nothing: the embedded server, the selected context unused", nil, nil, natsflags.Values{}, true},
		{"--server", []string{"--server", "nats://a:1"}, nil, natsflags.Values{Server: "nats://a:1"}, false},
		{"-s", []string{"-s", "nats://a:1"}, nil, natsflags.Values{Server: "nats://a:1"}, false},
		{"--nats-url, the old name", []string{"--nats-url", "nats://a:1"}, nil, natsflags.Values{Server: "nats://a:1"}, false},
		{"--nats-creds and --creds", []string{"--nats-creds", "old.creds"}, nil, natsflags.Values{Creds: "old.creds"}, true},
		{"--tls-cert, --tls-key, --tls-ca", []string{"--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca"}, nil,
			natsflags.Values{TLSCert: "c", TLSKey: "k", TLSCA: "ca"}, true},
		{"TOOLEXEC_NATS_URL", nil, map[string]string{"TOOLEXEC_NATS_URL": "nats://t:1"}, natsflags.Values{Server: "nats://t:1"}, false},
		{"NATS_URL", nil, map[string]string{"NATS_URL": "nats://n:1"}, natsflags.Values{Server: "nats://n:1"}, false},
		{"TOOLEXEC_NATS_URL beats NATS_URL", nil, map[string]string{"TOOLEXEC_NATS_URL": "nats://t:1", "NATS_URL": "nats://n:1"},
			natsflags.Values{Server: "nats://t:1"}, false},
		{"the flag beats both", []string{"-s", "nats://f:1"}, map[string]string{"TOOLEXEC_NATS_URL": "nats://t:1", "NATS_URL": "nats://n:1"},
			natsflags.Values{Server: "nats://f:1"}, false},
		{"TOOLEXEC_NATS_USER and _PASSWORD", nil, map[string]string{"TOOLEXEC_NATS_USER": "exec", "TOOLEXEC_NATS_PASSWORD": "pw"},
			natsflags.Values{User: "exec", Password: "pw"}, true},
		{"NATS_CREDS under TOOLEXEC_NATS_CREDS", nil, map[string]string{"TOOLEXEC_NATS_CREDS": "t.creds", "NATS_CREDS": "n.creds"},
			natsflags.Values{Creds: "t.creds"}, true},
		{"TOOLEXEC_TLS_CA and NATS_CERT/NATS_KEY", nil, map[string]string{"TOOLEXEC_TLS_CA": "ca", "NATS_CERT": "c", "NATS_KEY": "k"},
			natsflags.Values{TLSCA: "ca", TLSCert: "c", TLSKey: "k"}, true},
		{"--context", []string{"--context", "prod"}, nil, natsflags.Values{Server: "nats://prod:4222", Creds: filepath.Join(home, "exec.creds")}, false},
		{"NATS_CONTEXT", nil, map[string]string{"NATS_CONTEXT": "prod"}, natsflags.Values{Server: "nats://prod:4222", Creds: filepath.Join(home, "exec.creds")}, false},
		{"TOOLEXEC_CONTEXT, and a flag over its values", []string{"--creds", "mine.creds"}, map[string]string{"TOOLEXEC_CONTEXT": "prod"},
			natsflags.Values{Server: "nats://prod:4222", Creds: "mine.creds"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"HOME": home}
			for k, v := range c.env {
				env[k] = v
			}
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			var cfg config
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			cfg.register(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if err := applyEnv(fs, lookup); err != nil {
				t.Fatal(err)
			}
			if err := cfg.resolveNATS(lookup); err != nil {
				t.Fatal(err)
			}
			if cfg.conn.Values != c.want || cfg.embedded() != c.embedded {
				t.Fatalf("connection %+v (embedded %t), want %+v (embedded %t)", cfg.conn.Values, cfg.embedded(), c.want, c.embedded)
			}
		})
	}
}

// TestVersion: --version names the build.
func TestVersion(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "executor version " + buildinfo.Get().String() + "\n"; out.String() != want {
		t.Fatalf("--version printed %q, want %q", out.String(), want)
	}
}

// TestHelpHidesOldNames: the help lists the nats CLI's names only.
func TestHelpHidesOldNames(t *testing.T) {
	var cfg config
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	cfg.register(fs)
	usage := fs.FlagUsages()
	for _, old := range []string{"--nats-url ", "--nats-creds", "--nats-user", "--nats-password", "--nats-token", "--nats-nkey", "--tls-cert", "--tls-key", "--tls-ca"} {
		if strings.Contains(usage, old) {
			t.Errorf("the help shows %s", old)
		}
	}
	for _, name := range []string{"-s, --server", "--creds", "--tlscert", "--context"} {
		if !strings.Contains(usage, name) {
			t.Errorf("the help lacks %s", name)
		}
	}
}
