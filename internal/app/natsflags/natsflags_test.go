package natsflags

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// home is a temporary HOME holding the nats CLI's contexts.
type home struct {
	dir string
	env map[string]string
}

func newHome(t *testing.T) *home {
	t.Helper()
	d := t.TempDir()
	return &home{dir: d, env: map[string]string{"HOME": d}}
}

// context writes a context file under the nats CLI's directory (cfg: the
// directory that holds nats/).
func (h *home) context(t *testing.T, cfg, name, body string) {
	t.Helper()
	dir := filepath.Join(cfg, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (h *home) selectCtx(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, ".config", "nats", "context.txt"), []byte(name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (h *home) lookup(k string) (string, bool) { v, ok := h.env[k]; return v, ok }

// resolve parses args with a fresh flag set of cfg and resolves them.
func resolve(t *testing.T, h *home, cfg Config, args ...string) (Resolved, error) {
	t.Helper()
	var f Flags
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.Register(fs, cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return f.Resolve(h.lookup)
}

var emitterCfg = Config{SelectedContext: true}
var executorCfg = Config{ProgramEnv: "TOOLEXEC_"}

func TestAliases(t *testing.T) {
	// Every old spelling of either program sets the option its new name does.
	cases := []struct {
		alias string
		get   func(Values) string
	}{
		{"nats-url", func(v Values) string { return v.Server }},
		{"nats-creds", func(v Values) string { return v.Creds }},
		{"nats-nkey", func(v Values) string { return v.NKey }},
		{"nats-user", func(v Values) string { return v.User }},
		{"nats-password", func(v Values) string { return v.Password }},
		{"nats-token", func(v Values) string { return v.Token }},
		{"tls-cert", func(v Values) string { return v.TLSCert }},
		{"tls-key", func(v Values) string { return v.TLSKey }},
		{"tls-ca", func(v Values) string { return v.TLSCA }},
	}
	for _, c := range cases {
		t.Run(c.alias, func(t *testing.T) {
			args := []string{"--" + c.alias, "x-" + c.alias}
			if c.alias == "nats-password" {
				args = append(args, "--user", "u") // a password needs a user
			}
			if c.alias == "nats-user" {
				args = append(args, "--password", "p") // else the user is a token
			}
			for _, cfg := range []Config{emitterCfg, executorCfg} {
				r, err := resolve(t, newHome(t), cfg, args...)
				if err != nil {
					t.Fatal(err)
				}
				if got := c.get(r.Values); got != "x-"+c.alias {
					t.Fatalf("--%s set %q, want %q (resolved %+v)", c.alias, got, "x-"+c.alias, r.Values)
				}
			}
		})
	}
	// The aliases are hidden; the new names are not.
	var f Flags
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.Register(fs, emitterCfg)
	usage := fs.FlagUsages()
	for _, c := range cases {
		if strings.Contains(usage, "--"+c.alias+" ") {
			t.Errorf("--%s shows in the help:\n%s", c.alias, usage)
		}
	}
	for _, name := range []string{"-s, --server", "--creds", "--nkey", "--user", "--password", "--token", "--tlscert", "--tlskey", "--tlsca", "--context", "--no-context", "--inbox-prefix"} {
		if !strings.Contains(usage, name) {
			t.Errorf("%s missing from the help:\n%s", name, usage)
		}
	}
}

func TestPrecedence(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		env  map[string]string
		args []string
		want Values
		from map[string]Source
	}{
		{"nothing", emitterCfg, nil, nil, Values{}, map[string]Source{}},
		{"NATS_* variables", emitterCfg,
			map[string]string{"NATS_URL": "nats://a:1", "NATS_CREDS": "a.creds", "NATS_CERT": "c.pem", "NATS_KEY": "k.pem", "NATS_CA": "ca.pem"},
			nil, Values{Server: "nats://a:1", Creds: "a.creds", TLSCert: "c.pem", TLSKey: "k.pem", TLSCA: "ca.pem"},
			map[string]Source{"server": {Env: "NATS_URL"}, "creds": {Env: "NATS_CREDS"}}},
		{"NATS_NKEY", emitterCfg, map[string]string{"NATS_NKEY": "u.nk"}, nil, Values{NKey: "u.nk"}, nil},
		{"NATS_USER and NATS_PASSWORD", emitterCfg, map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p"}, nil,
			Values{User: "u", Password: "p"}, map[string]Source{"password": {Env: "NATS_PASSWORD"}}},
		{"flag beats variable", emitterCfg, map[string]string{"NATS_URL": "nats://env:1"}, []string{"-s", "nats://flag:1"},
			Values{Server: "nats://flag:1"}, map[string]Source{"server": {Flag: true}}},
		{"an empty variable is unset", emitterCfg, map[string]string{"NATS_URL": ""}, nil, Values{}, nil},
		{"the emitter reads no TOOLEXEC_ variable", emitterCfg, map[string]string{"TOOLEXEC_NATS_URL": "nats://t:1"}, nil, Values{}, nil},
		{"executor: TOOLEXEC_ beats NATS_", executorCfg,
			map[string]string{"TOOLEXEC_NATS_URL": "nats://t:1", "NATS_URL": "nats://n:1", "TOOLEXEC_TLS_CA": "t.pem", "NATS_CA": "n.pem", "NATS_CREDS": "n.creds"},
			nil, Values{Server: "nats://t:1", TLSCA: "t.pem", Creds: "n.creds"},
			map[string]Source{"server": {Env: "TOOLEXEC_NATS_URL"}, "creds": {Env: "NATS_CREDS"}}},
		{"executor: flag beats TOOLEXEC_", executorCfg, map[string]string{"TOOLEXEC_NATS_URL": "nats://t:1"}, []string{"--nats-url", "nats://f:1"},
			Values{Server: "nats://f:1"}, nil},
		{"executor: TOOLEXEC_NATS_TOKEN", executorCfg, map[string]string{"TOOLEXEC_NATS_TOKEN": "tok"}, nil, Values{Token: "tok"}, nil},
		{"a user without a password is a token", emitterCfg, nil, []string{"--user", "s3cret"},
			Values{Token: "s3cret"}, map[string]Source{"token": {Flag: true}, "user": {}}},
		{"NATS_USER alone is a token", emitterCfg, map[string]string{"NATS_USER": "s3cret"}, nil,
			Values{Token: "s3cret"}, map[string]Source{"token": {Env: "NATS_USER"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHome(t)
			for k, v := range c.env {
				h.env[k] = v
			}
			r, err := resolve(t, h, c.cfg, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if r.Values != c.want {
				t.Fatalf("values %+v, want %+v", r.Values, c.want)
			}
			for name, want := range c.from {
				if got := r.From(name); got != want {
					t.Errorf("%s from %+v, want %+v", name, got, want)
				}
			}
		})
	}
}

func TestContexts(t *testing.T) {
	const prod = `{"description":"production","url":"nats://prod:4222","creds":"~/prod.creds","ca":"$CERTS/ca.pem","inbox_prefix":"_I.prod","color_scheme":"dark"}`
	cases := []struct {
		name    string
		cfg     Config
		xdg     bool // contexts under XDG_CONFIG_HOME instead of ~/.config
		env     map[string]string
		args    []string
		sel     string // context.txt
		want    func(home string) Values
		ctx     string // context used
		named   bool
		wantErr string
	}{
		{"named by --context", emitterCfg, false, nil, []string{"--context", "prod"}, "",
			func(h string) Values {
				return Values{Server: "nats://prod:4222", Creds: h + "/prod.creds", TLSCA: "/etc/certs/ca.pem", InboxPrefix: "_I.prod"}
			}, "prod", true, ""},
		{"under XDG_CONFIG_HOME", emitterCfg, true, nil, []string{"--context", "prod"}, "",
			func(h string) Values {
				return Values{Server: "nats://prod:4222", Creds: h + "/prod.creds", TLSCA: "/etc/certs/ca.pem", InboxPrefix: "_I.prod"}
			}, "prod", true, ""},
		{"named by NATS_CONTEXT", emitterCfg, false, map[string]string{"NATS_CONTEXT": "dev"}, nil, "",
			func(string) Values { return Values{Server: "nats://dev:4222", User: "dev", Password: "devpw"} }, "dev", true, ""},
		{"executor: named by TOOLEXEC_CONTEXT over NATS_CONTEXT", executorCfg, false,
			map[string]string{"TOOLEXEC_CONTEXT": "dev", "NATS_CONTEXT": "prod"}, nil, "",
			func(string) Values { return Values{Server: "nats://dev:4222", User: "dev", Password: "devpw"} }, "dev", true, ""},
		{"the selected context", emitterCfg, false, nil, nil, "dev",
			func(string) Values { return Values{Server: "nats://dev:4222", User: "dev", Password: "devpw"} }, "dev", false, ""},
		{"--context beats the selected one", emitterCfg, false, nil, []string{"--context", "bare"}, "dev",
			func(string) Values { return Values{Server: defaultURL, Token: "t0k"} }, "bare", true, ""},
		{"executor: the selected context does not apply", executorCfg, false, nil, nil, "dev",
			func(string) Values { return Values{} }, "", false, ""},
		{"--no-context: neither the selected one", emitterCfg, false, nil, []string{"--no-context"}, "dev",
			func(string) Values { return Values{} }, "", false, ""},
		{"--no-context: nor NATS_CONTEXT", emitterCfg, false, map[string]string{"NATS_CONTEXT": "dev"}, []string{"--no-context"}, "",
			func(string) Values { return Values{} }, "", false, ""},
		{"flags override the context's values", emitterCfg, false, map[string]string{"NATS_URL": "nats://env:1"},
			[]string{"--context", "prod", "--tlsca", "mine.pem"}, "",
			func(h string) Values {
				return Values{Server: "nats://env:1", Creds: h + "/prod.creds", TLSCA: "mine.pem", InboxPrefix: "_I.prod"}
			}, "prod", true, ""},
		{"explicit credentials set the context's aside", emitterCfg, false, nil,
			[]string{"--context", "prod", "--user", "alice", "--password", "pw"}, "",
			func(string) Values {
				return Values{Server: "nats://prod:4222", User: "alice", Password: "pw", TLSCA: "/etc/certs/ca.pem", InboxPrefix: "_I.prod"}
			}, "prod", true, ""},
		{"a context's password never joins a flag's creds", emitterCfg, false, nil,
			[]string{"--context", "dev", "--creds", "mine.creds"}, "",
			func(string) Values { return Values{Server: "nats://dev:4222", Creds: "mine.creds"} }, "dev", true, ""},
		{"the certificate and key give way together", emitterCfg, false, nil,
			[]string{"--context", "tls", "--tlscert", "mine.pem"}, "",
			func(string) Values { return Values{Server: "tls://t:4222", TLSCert: "mine.pem", TLSCA: "ca.pem"} }, "tls", true, ""},
		{"unknown context", emitterCfg, false, nil, []string{"--context", "nope"}, "", nil, "", false, `unknown context "nope"`},
		{"unknown selected context", emitterCfg, false, nil, nil, "gone", nil, "", false, `unknown context "gone"`},
		{"a name that leaves the directory", emitterCfg, false, nil, []string{"--context", "../../etc/passwd"}, "", nil, "", false, "not a file name"},
		{"what toolexec cannot honour", emitterCfg, false, nil, []string{"--context", "nsc"}, "", nil, "", false, "sets nsc, jetstream_domain, tls_first"},
		{"not JSON", emitterCfg, false, nil, []string{"--context", "broken"}, "", nil, "", false, "is not a nats CLI context"},
		{"a user-token and a token", emitterCfg, false, nil, []string{"--user", "u", "--token", "t"}, "", nil, "", false, "one of a token and a user"},
		{"--context with --no-context", emitterCfg, false, nil, []string{"--context", "dev", "--no-context"}, "", nil, "", false, "contradict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHome(t)
			h.env["CERTS"] = "/etc/certs"
			cfgDir := filepath.Join(h.dir, ".config")
			if c.xdg {
				cfgDir = filepath.Join(h.dir, "xdg")
				h.env["XDG_CONFIG_HOME"] = cfgDir
			}
			h.context(t, cfgDir, "prod", prod)
			h.context(t, cfgDir, "dev", `{"url":"nats://dev:4222","user":"dev","password":"devpw"}`)
			h.context(t, cfgDir, "bare", `{"token":"t0k"}`)
			h.context(t, cfgDir, "tls", `{"url":"tls://t:4222","cert":"c.pem","key":"k.pem","ca":"ca.pem"}`)
			h.context(t, cfgDir, "nsc", `{"nsc":"nsc://op/acc/user","jetstream_domain":"hub","tls_first":true}`)
			h.context(t, cfgDir, "broken", `{"url":`)
			for k, v := range c.env {
				h.env[k] = v
			}
			if c.sel != "" {
				h.selectCtx(t, c.sel)
			}
			r, err := resolve(t, h, c.cfg, c.args...)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one with %q", err, c.wantErr)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v does not match ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := c.want(h.dir); r.Values != want {
				t.Fatalf("values\n %+v, want\n %+v", r.Values, want)
			}
			if r.Context != c.ctx || r.ContextNamed != c.named {
				t.Fatalf("context %q (named %t), want %q (named %t)", r.Context, r.ContextNamed, c.ctx, c.named)
			}
		})
	}
}

func TestHint(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		args  []string
		sel   string
		want  string
		needs []string
	}{
		{"nothing given", nil, nil, "", "", nil},
		{"server and creds", nil, []string{"-s", "nats://127.0.0.1:4333", "--creds", "/k/a b.creds"}, "",
			` -s nats://127.0.0.1:4333 --creds '/k/a b.creds'`, nil},
		{"from the environment too", map[string]string{"NATS_URL": "nats://n:1", "NATS_CA": "ca.pem"}, nil, "",
			` -s nats://n:1 --tlsca ca.pem`, nil},
		{"a password given by flag is named, not repeated", nil, []string{"--user", "alice", "--password", "hunter2"}, "",
			` --user alice --password "$NATS_PASSWORD"`, []string{"NATS_PASSWORD"}},
		{"a password from the environment names its variable", map[string]string{"NATS_USER": "alice", "NATS_PASSWORD": "hunter2"}, nil, "",
			` --user alice --password "$NATS_PASSWORD"`, nil},
		{"a token", nil, []string{"--token", "hunter2"}, "", ` --token "$NATS_TOKEN"`, []string{"NATS_TOKEN"}},
		{"a user that is a token", nil, []string{"--user", "hunter2"}, "", ` --token "$NATS_TOKEN"`, []string{"NATS_TOKEN"}},
		{"NATS_USER that is a token", map[string]string{"NATS_USER": "hunter2"}, nil, "", ` --token "$NATS_USER"`, nil},
		{"a password in the URL", nil, []string{"-s", "nats://u:hunter2@h:4222"}, "", ` -s "$NATS_URL"`, []string{"NATS_URL"}},
		{"the context, not its values", nil, []string{"--context", "dev"}, "", ` --context dev`, nil},
		{"the selected context is pinned", nil, nil, "dev", ` --context dev`, nil},
		{"--no-context", nil, []string{"--no-context"}, "dev", ` --no-context`, nil},
		{"a context and an override", nil, []string{"--context", "dev", "-s", "nats://other:1"}, "", ` --context dev -s nats://other:1`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHome(t)
			h.context(t, filepath.Join(h.dir, ".config"), "dev", `{"url":"nats://dev:4222","user":"dev","password":"devpw"}`)
			if c.sel != "" {
				h.selectCtx(t, c.sel)
			}
			for k, v := range c.env {
				h.env[k] = v
			}
			r, err := resolve(t, h, emitterCfg, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			hint := r.Hint()
			if got := hint.String(); got != c.want {
				t.Fatalf("hint %q, want %q", got, c.want)
			}
			if !reflect.DeepEqual(hint.Needs, c.needs) {
				t.Fatalf("needs %v, want %v", hint.Needs, c.needs)
			}
			for _, secret := range []string{"hunter2", "devpw"} {
				if strings.Contains(hint.String(), secret) {
					t.Fatalf("hint %q shows a secret", hint.String())
				}
			}
		})
	}
}

func TestOwns(t *testing.T) {
	for _, n := range []string{"server", "nats-url", "creds", "nats-creds", "tls-ca", "tlsca", "context", "no-context", "inbox-prefix"} {
		if !Owns(n) {
			t.Errorf("Owns(%q) = false", n)
		}
	}
	for _, n := range []string{"nats-port", "nats-host", "nats-wait", "store", "timeout"} {
		if Owns(n) {
			t.Errorf("Owns(%q) = true", n)
		}
	}
}

func TestConnectConfig(t *testing.T) {
	h := newHome(t)
	r, err := resolve(t, h, emitterCfg, "-s", "nats://x:1", "--user", "u", "--password", "p", "--tlsca", "ca.pem", "--inbox-prefix", "_I.me")
	if err != nil {
		t.Fatal(err)
	}
	cc := r.ConnectConfig()
	if cc.URL != "nats://x:1" || cc.User != "u" || cc.Password != "p" || cc.TLSCA != "ca.pem" || cc.InboxPrefix != "_I.me" {
		t.Fatalf("ConnectConfig = %+v", cc)
	}
}
