package natsflags

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec/bus"
)

// ErrInvalid marks a refusal of the options themselves (contradicting flags, a
// context that does not exist or cannot be honoured): a program reports it as
// bad usage.
var ErrInvalid = errors.New("invalid NATS connection options")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Values are connection options: what a flag set holds, or what Resolve made
// of flags, variables and a context.
type Values struct {
	Server, Creds, NKey, User, Password, Token string
	TLSCert, TLSKey, TLSCA                     string
	InboxPrefix                                string
}

// option describes one connection option.
type option struct {
	name    string   // the flag, as the nats CLI names it
	short   string   // its one-letter form, if any
	aliases []string // old spellings, hidden
	natsEnv string   // the nats CLI's variable, if it has one
	// program is the suffix of the program's own variable (the executor's
	// TOOLEXEC_ + program), "" for none.
	program string
	usage   string
	secret  bool // never printed in a hint: a variable is named instead
	auth    bool // one of the credentials, which travel together
	tlsPair bool // the client certificate or its key
	field   func(*Values) *string
}

// options are the connection options, in the order hints print them.
var options = []option{
	{name: "server", short: "s", aliases: []string{"nats-url"}, natsEnv: "NATS_URL", program: "NATS_URL",
		usage: "NATS server URL(s), comma-separated (default $NATS_URL, else the context's, else nats://127.0.0.1:4222)",
		field: func(v *Values) *string { return &v.Server }},
	{name: "creds", aliases: []string{"nats-creds"}, natsEnv: "NATS_CREDS", program: "NATS_CREDS", auth: true,
		usage: "NATS credentials file (.creds) ($NATS_CREDS)", field: func(v *Values) *string { return &v.Creds }},
	{name: "nkey", aliases: []string{"nats-nkey"}, natsEnv: "NATS_NKEY", program: "NATS_NKEY", auth: true,
		usage: "NATS user nkey seed file ($NATS_NKEY)", field: func(v *Values) *string { return &v.NKey }},
	{name: "user", aliases: []string{"nats-user"}, natsEnv: "NATS_USER", program: "NATS_USER", auth: true,
		usage: "NATS user name; without --password, a token, as the nats CLI takes it ($NATS_USER)",
		field: func(v *Values) *string { return &v.User }},
	{name: "password", aliases: []string{"nats-password"}, natsEnv: "NATS_PASSWORD", program: "NATS_PASSWORD", auth: true, secret: true,
		usage: "NATS password (prefer $NATS_PASSWORD: flags show in ps)", field: func(v *Values) *string { return &v.Password }},
	{name: "token", aliases: []string{"nats-token"}, program: "NATS_TOKEN", auth: true, secret: true,
		usage: "NATS authentication token", field: func(v *Values) *string { return &v.Token }},
	{name: "tlscert", aliases: []string{"tls-cert"}, natsEnv: "NATS_CERT", program: "TLS_CERT", tlsPair: true,
		usage: "TLS client certificate, PEM file ($NATS_CERT)", field: func(v *Values) *string { return &v.TLSCert }},
	{name: "tlskey", aliases: []string{"tls-key"}, natsEnv: "NATS_KEY", program: "TLS_KEY", tlsPair: true,
		usage: "TLS client key, PEM file ($NATS_KEY)", field: func(v *Values) *string { return &v.TLSKey }},
	{name: "tlsca", aliases: []string{"tls-ca"}, natsEnv: "NATS_CA", program: "TLS_CA",
		usage: "TLS certificate authorities to trust, PEM file ($NATS_CA)", field: func(v *Values) *string { return &v.TLSCA }},
	{name: "inbox-prefix", program: "INBOX_PREFIX",
		usage: "prefix of reply subjects instead of _INBOX, for credentials allowed to subscribe under a prefix of their own only",
		field: func(v *Values) *string { return &v.InboxPrefix }},
}

// The context options.
const (
	contextFlag   = "context"
	noContextFlag = "no-context"
	contextEnv    = "NATS_CONTEXT"
	contextProg   = "CONTEXT"
)

// Config says how a program reads the options.
type Config struct {
	// ProgramEnv is the prefix of the program's own variables, which win over
	// the NATS_* ones: "TOOLEXEC_" gives the executor TOOLEXEC_NATS_URL,
	// TOOLEXEC_NATS_CREDS, TOOLEXEC_NATS_NKEY, TOOLEXEC_NATS_USER,
	// TOOLEXEC_NATS_PASSWORD, TOOLEXEC_NATS_TOKEN, TOOLEXEC_TLS_CERT,
	// TOOLEXEC_TLS_KEY, TOOLEXEC_TLS_CA, TOOLEXEC_INBOX_PREFIX and
	// TOOLEXEC_CONTEXT. Empty: none.
	ProgramEnv string
	// SelectedContext lets the context the nats CLI has selected apply when no
	// context is named. The emitter allows it, as the nats CLI does; the
	// executor, whose default is a server of its own, does not.
	SelectedContext bool
}

// Flags holds the connection flags of one program.
type Flags struct {
	cfg       Config
	fs        *pflag.FlagSet
	v         Values
	context   string
	noContext bool
}

// Register defines the connection flags on fs, with the old spellings as
// hidden aliases.
func (f *Flags) Register(fs *pflag.FlagSet, cfg Config) {
	f.cfg, f.fs = cfg, fs
	for _, o := range options {
		p := o.field(&f.v)
		usage := o.usage
		if o.natsEnv == "" && cfg.ProgramEnv != "" { // named here, since no NATS_* variable stands for it
			usage += " (prefer $" + cfg.ProgramEnv + o.program + ": flags show in ps)"
		}
		fs.StringVarP(p, o.name, o.short, "", usage)
		for _, a := range o.aliases {
			fs.StringVar(p, a, "", "old name of --"+o.name)
			if err := fs.MarkHidden(a); err != nil {
				panic(err) // defined just above
			}
		}
	}
	ctxUsage := "the nats CLI's saved context to connect with ($NATS_CONTEXT); flags and variables override its values"
	if cfg.SelectedContext {
		ctxUsage += " (default: the context the nats CLI has selected)"
	}
	fs.StringVar(&f.context, contextFlag, "", ctxUsage)
	fs.BoolVar(&f.noContext, noContextFlag, false, "use no nats CLI context: neither $NATS_CONTEXT nor the selected one")
}

// Owns reports whether the flag named name is one of the connection flags or
// their aliases, which a program's generic TOOLEXEC_* handling must leave to
// this package.
func Owns(name string) bool {
	if name == contextFlag || name == noContextFlag {
		return true
	}
	for _, o := range options {
		if o.name == name {
			return true
		}
		for _, a := range o.aliases {
			if a == name {
				return true
			}
		}
	}
	return false
}

// changed reports whether the command line set o, under its name or an alias.
func (f *Flags) changed(o option) bool {
	for _, n := range append([]string{o.name}, o.aliases...) {
		if fl := f.fs.Lookup(n); fl != nil && fl.Changed {
			return true
		}
	}
	return false
}

// Source says where a resolved option came from.
type Source struct {
	// Flag is set when the command line gave the option.
	Flag bool
	// Env names the variable that gave it, if one did.
	Env string
	// Context is set when the context gave it.
	Context bool
}

// Resolved is what the options come to: the values, the context used, and
// where each value came from.
type Resolved struct {
	Values
	// Context names the context whose values were used ("" for none), and
	// ContextPath is its file.
	Context, ContextPath string
	// ContextNamed reports that the context was named (by --context or a
	// variable) rather than selected in the nats CLI.
	ContextNamed bool
	// NoContext reports --no-context.
	NoContext bool
	from      map[string]Source
}

// From returns where the option of the flag named name came from; the zero
// Source when it is unset.
func (r Resolved) From(name string) Source { return r.from[name] }

// Lookup reads an environment variable, as os.LookupEnv does.
type Lookup func(string) (string, bool)

// Resolve combines the flags, the variables lookup finds and the context into
// the options to connect with. Errors match ErrInvalid, except the failure to
// read a context file that exists.
func (f *Flags) Resolve(lookup Lookup) (Resolved, error) {
	env := func(name string) (string, bool) {
		if name == "" {
			return "", false
		}
		v, ok := lookup(name)
		return v, ok && v != ""
	}
	r := Resolved{NoContext: f.noContext, from: map[string]Source{}}

	// The context: named by the flag, a variable, or selected in the nats CLI.
	name, named := f.context, f.context != ""
	if named && f.noContext {
		return Resolved{}, invalid("--context %s and --no-context contradict each other", f.context)
	}
	if !named && !f.noContext {
		if v, ok := env(f.programEnv(contextProg)); ok {
			name, named = v, true
		} else if v, ok := env(contextEnv); ok {
			name, named = v, true
		}
	}
	dir, dirErr := configDir(lookup)
	if name == "" && f.cfg.SelectedContext && !f.noContext && dirErr == nil {
		sel, err := selectedContext(dir)
		if err != nil {
			return Resolved{}, err
		}
		name = sel
	}
	var ctx *contextFile
	if name != "" {
		if dirErr != nil {
			return Resolved{}, invalid("context %s: %v", name, dirErr)
		}
		c, path, err := loadContext(dir, name, lookup)
		if err != nil {
			return Resolved{}, err
		}
		ctx = c
		r.Context, r.ContextPath, r.ContextNamed = name, path, named
	}

	// Flags and variables first; the context fills what they leave empty.
	auth, tlsPair := false, false
	for _, o := range options {
		p := o.field(&r.Values)
		switch {
		case f.changed(o):
			*p = *o.field(&f.v)
			r.from[o.name] = Source{Flag: true}
		default:
			for _, name := range []string{f.programEnv(o.program), o.natsEnv} {
				if v, ok := env(name); ok {
					*p = v
					r.from[o.name] = Source{Env: name}
					break
				}
			}
		}
		if *p != "" {
			auth = auth || o.auth
			tlsPair = tlsPair || o.tlsPair
		}
	}
	if r.User != "" && r.Password == "" {
		// As the nats CLI: a user given without a password is a token.
		if r.Token != "" {
			return Resolved{}, invalid("give one of a token and a user: a user without a password is a token, and a token is given too")
		}
		r.Token, r.User = r.User, ""
		r.from["token"], r.from["user"] = r.from["user"], Source{}
	}
	if ctx != nil {
		for _, o := range options {
			p := o.field(&r.Values)
			if *p != "" || (o.auth && auth) || (o.tlsPair && tlsPair) {
				continue
			}
			if v := *o.field(&ctx.Values); v != "" {
				*p = v
				r.from[o.name] = Source{Context: true}
			}
		}
		if r.Server == "" {
			r.Server = defaultURL // a context without a URL means the default server, as in the nats CLI
		}
	}
	return r, nil
}

// defaultURL is the server a context without a URL names.
const defaultURL = "nats://127.0.0.1:4222"

func (f *Flags) programEnv(suffix string) string {
	if f.cfg.ProgramEnv == "" || suffix == "" {
		return ""
	}
	return f.cfg.ProgramEnv + suffix
}

// ConnectConfig returns the bus configuration the options stand for; the
// caller adds the connection's name and logger.
func (r Resolved) ConnectConfig() bus.ConnectConfig {
	return bus.ConnectConfig{
		URL: r.Server, CredsFile: r.Creds, NKeyFile: r.NKey, User: r.User, Password: r.Password, Token: r.Token,
		TLSCert: r.TLSCert, TLSKey: r.TLSKey, TLSCA: r.TLSCA, InboxPrefix: r.InboxPrefix,
	}
}

// Hint is the connection part of a command line that reaches the same server
// the same way, for a program to print in the commands it suggests.
type Hint struct {
	// Args are the options, shell-quoted, to put after the program's name.
	Args []string
	// Needs names the variables the Args refer to that the environment did
	// not set: secrets given on the command line, which a hint never repeats.
	Needs []string
}

// String returns the arguments joined by spaces, with a leading space when
// there are any, ready to follow the program's name.
func (h Hint) String() string {
	if len(h.Args) == 0 {
		return ""
	}
	return " " + strings.Join(h.Args, " ")
}

// Hint returns the options to repeat: the context used and every option a
// flag or a variable gave (a context's own values come with it). A secret is
// never repeated: the hint names a variable instead ("$NATS_PASSWORD"), the
// one that gave it or, for one given by flag, the nats CLI's (listed in Needs).
func (r Resolved) Hint() Hint {
	var h Hint
	if r.Context != "" {
		h.Args = append(h.Args, "--context", shellQuote(r.Context))
	} else if r.NoContext {
		h.Args = append(h.Args, "--no-context")
	}
	need := map[string]bool{}
	for _, o := range options {
		v := *o.field(&r.Values)
		src := r.from[o.name]
		if v == "" || src.Context || (!src.Flag && src.Env == "") {
			continue
		}
		flag := "--" + o.name
		if o.short != "" {
			flag = "-" + o.short
		}
		secret := o.secret || (o.name == "server" && urlHasPassword(v))
		if !secret {
			h.Args = append(h.Args, flag, shellQuote(v))
			continue
		}
		variable := src.Env
		if variable == "" {
			variable = secretVar(o)
			need[variable] = true
		}
		h.Args = append(h.Args, flag, `"$`+variable+`"`)
	}
	for v := range need {
		h.Needs = append(h.Needs, v)
	}
	sort.Strings(h.Needs)
	return h
}

// secretVar is the variable a hint names for a secret given by flag.
func secretVar(o option) string {
	if o.natsEnv != "" {
		return o.natsEnv
	}
	return "NATS_" + strings.ToUpper(o.name) // the token: no variable of the nats CLI's
}

// urlHasPassword reports whether one of the comma-separated URLs carries a
// password.
func urlHasPassword(s string) bool {
	for _, one := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil {
			if strings.Contains(one, "@") {
				return true // unparsable with an @: assume the worst
			}
			continue
		}
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				return true
			}
			if u.User.Username() != "" {
				return true // a user alone in a URL is a token
			}
		}
	}
	return false
}

// shellQuote returns s as one word for a POSIX shell: as it is when it holds
// only characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,@%+=", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
