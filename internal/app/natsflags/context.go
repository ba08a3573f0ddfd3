package natsflags

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// contextFile is what a nats CLI context file says that toolexec uses.
type contextFile struct {
	Values
}

// contextJSON is a context file's members as the nats CLI writes them. Members
// it does not list (description, color_scheme, …) change nothing about the
// connection and are ignored.
type contextJSON struct {
	URL         string `json:"url"`
	User        string `json:"user"`
	Password    string `json:"password"`
	Token       string `json:"token"`
	Creds       string `json:"creds"`
	NKey        string `json:"nkey"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
	InboxPrefix string `json:"inbox_prefix"`

	// What toolexec cannot honour: a context setting one is refused.
	NSC           string `json:"nsc"`
	SocksProxy    string `json:"socks_proxy"`
	UserJWT       string `json:"user_jwt"`
	UserSeed      string `json:"user_seed"`
	JSDomain      string `json:"jetstream_domain"`
	JSAPIPrefix   string `json:"jetstream_api_prefix"`
	JSEventPrefix string `json:"jetstream_event_prefix"`
	TLSFirst      bool   `json:"tls_first"`
}

// configDir returns the nats CLI's configuration directory: $XDG_CONFIG_HOME/nats,
// else $HOME/.config/nats.
func configDir(lookup Lookup) (string, error) {
	if x, ok := lookup("XDG_CONFIG_HOME"); ok && x != "" {
		return filepath.Join(x, "nats"), nil
	}
	home, ok := lookup("HOME")
	if !ok || home == "" {
		return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set, so the nats CLI's contexts cannot be found")
	}
	return filepath.Join(home, ".config", "nats"), nil
}

// selectedContext returns the context the nats CLI has selected, "" for none.
func selectedContext(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "context.txt"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the nats CLI's selected context: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// validContextName refuses names that would leave the context directory or
// that no nats CLI context can have.
func validContextName(name string) error {
	if name == "" || name == "." || strings.Contains(name, "..") || strings.ContainsAny(name, `/\`) {
		return invalid("context name %q is not a file name in the nats CLI's context directory", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == ' ' {
			return invalid("context name %q holds a space or a control character", name)
		}
	}
	return nil
}

// loadContext reads the context name in dir and returns what it says and its
// file's path. File names in it are expanded: a leading ~ is the home
// directory, and $VAR or ${VAR} is the variable's value, as the nats CLI does.
func loadContext(dir, name string, lookup Lookup) (*contextFile, string, error) {
	if err := validContextName(name); err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "context", name+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", invalid("unknown context %q: no file %s (nats context ls lists the contexts)", name, path)
	}
	if err != nil {
		return nil, "", fmt.Errorf("context %s: %w", name, err)
	}
	var j contextJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, "", invalid("context %s (%s) is not a nats CLI context: %v", name, path, err)
	}
	var unsupported []string
	for _, u := range []struct {
		field string
		set   bool
	}{
		{"nsc", j.NSC != ""}, {"socks_proxy", j.SocksProxy != ""}, {"user_jwt", j.UserJWT != ""},
		{"user_seed", j.UserSeed != ""}, {"jetstream_domain", j.JSDomain != ""},
		{"jetstream_api_prefix", j.JSAPIPrefix != ""}, {"jetstream_event_prefix", j.JSEventPrefix != ""},
		{"tls_first", j.TLSFirst},
	} {
		if u.set {
			unsupported = append(unsupported, u.field)
		}
	}
	if len(unsupported) > 0 {
		return nil, "",
			invalid("context %s (%s) sets %s, which toolexec cannot honour; give the connection options as flags instead (with --no-context "+
				"where the context is the selected one)",
				name, path, strings.Join(unsupported, ", "))
	}
	home, _ := lookup("HOME")
	expand := func(p string) string {
		if p == "" {
			return ""
		}
		p = os.Expand(p, func(v string) string { s, _ := lookup(v); return s })
		if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
			p = filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
		return p
	}
	return &contextFile{Values{
		Server: j.URL, User: j.User, Password: j.Password, Token: j.Token,
		Creds: expand(j.Creds), NKey: expand(j.NKey), TLSCert: expand(j.Cert), TLSKey: expand(j.Key), TLSCA: expand(j.CA),
		InboxPrefix: j.InboxPrefix,
	}}, path, nil
}
