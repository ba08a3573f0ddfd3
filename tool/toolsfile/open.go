package toolsfile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
	"github.com/tesserix/toolexec/tool/natstool"
)

// Options configure [Load] and [File.Open].
type Options struct {
	// Env looks up the variables ${VAR} refers to, for Load; nil means
	// os.LookupEnv.
	Env func(string) (string, bool)
	// Client, if set, sends every HTTP request the tools make: the requests of
	// HTTP tools (see httptool.Endpoint.Client) and those to MCP servers
	// reached by URL (see mcptool.Config.HTTPClient).
	Client *http.Client
	// Logger receives what the MCP servers log: starts, exits, restarts and
	// the lines stdio servers write on their standard error. Nil discards it.
	Logger *slog.Logger
}

// Load reads the tools file at path, expanding ${VAR} with opts.Env, and opens
// it ([File.Open]). Its errors are those of [Parse] and [File.Open], or the
// error reading the file. Close the returned Toolset when its tools are no
// longer called.
func Load(ctx context.Context, path string, opts Options) (*Toolset, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("toolsfile: %w", err)
	}
	f, err := Parse(data, path, opts.Env)
	if err != nil {
		return nil, err
	}
	return f.Open(ctx, opts)
}

// Toolset is what [File.Open] built: the tools, the MCP servers their
// bodies call, and the tools whose bodies workers serve, to be built on the
// executor's connection.
type Toolset struct {
	tools     []*tool.Tool
	nats      []natstool.Pending
	upstreams []*upstream
	log       *slog.Logger
	life      context.Context
	endLife   context.CancelFunc
	wg        sync.WaitGroup // the goroutines that build a server's tools once it is reached

	mu  sync.Mutex     // protects reg and the upstreams' tool lists
	reg *tool.Registry // nil until Attach
}

// Tools returns the tools built: those of the tools list in file order, then
// those imported, server by server. The tools whose bodies workers serve are
// not among them: see NATSTools. Nor are the imports of a server that could
// not be reached when the file was opened: [Toolset.Attach] adds them to the
// registry once it is.
func (s *Toolset) Tools() []*tool.Tool { return slices.Clone(s.tools) }

// NATSTools returns the tools of the tools list whose bodies workers serve
// over NATS, in file order, for the executor to build on its connection
// (natstool.Pending.Build).
func (s *Toolset) NATSTools() []natstool.Pending { return slices.Clone(s.nats) }

// Close closes the MCP servers (see mcptool.Upstream.Close): a call still in
// flight ends with an unknown outcome, so close them once the executor has
// drained. It always returns nil, and is safe to call more than once.
func (s *Toolset) Close() error {
	s.endLife()
	for _, u := range s.upstreams {
		u.up.Close()
	}
	s.wg.Wait()
	return nil
}

// Open builds the file's tools. It starts each MCP server (starting a stdio
// server's process; see mcptool.New), all at once, and waits for each to be
// reached; it lists the tools of each server reached, builds the tools that
// name it — with the server's input schema when the file gives no
// parameters — and imports its tools. HTTP tools are built as
// [Declaration.Build] builds them. Tools served over NATS are not built:
// [Toolset.NATSTools] hands them over, checked.
//
// A server that cannot be reached (mcptool.ErrUnavailable: the connection is
// refused, the process exits before answering, initialize fails or times
// out) does not stop the others: it is logged, and tried again in the background. The tools of the
// file that name it are built all the same — with the parameters the file
// gives, or a stand-in schema until the server gives its own — and the tools
// it imports are not known until it is reached. [Toolset.Attach] keeps a
// registry in step with it.
//
// It reports every other problem it finds, as [Parse] does: an errors.Join
// of [*Error] values in file order, each placed at its entry's line and
// unwrapping to the cause — a stdio server whose command cannot be run at all
// (no such program or directory, not executable), a server whose tools cannot
// be listed, a tool
// the server does not list (mcptool.ErrUnknownTool), a name an import cannot
// use (mcptool.ErrBadName), a key argument that is not a parameter of the
// server's schema (tool.ErrUnknownArgument), a tool name given twice across
// the file and its imports. On error the servers already started are closed
// and no Toolset is returned.
func (f *File) Open(ctx context.Context, opts Options) (*Toolset, error) {
	ts := &Toolset{log: logger(opts.Logger)}
	ts.life, ts.endLife = context.WithCancel(context.Background())
	type built struct {
		t    *tool.Tool
		line int
		site site // where its name is declared, for duplicates
	}
	var (
		all  []built
		errs []error
	)
	for _, d := range f.Tools {
		if opts.Client != nil {
			d.Endpoint.Client = opts.Client
		}
		t, err := d.Build()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, built{t, d.Line, d.site})
	}
	// Every server is started before any is waited for.
	for _, s := range f.Servers {
		cfg := s.Config
		cfg.Logger = opts.Logger
		if cfg.URL != "" {
			cfg.HTTPClient = opts.Client
		}
		u := &upstream{set: ts, server: s, refused: map[string]string{}}
		cfg.OnState = u.onState
		up, err := mcptool.New(cfg)
		if err != nil {
			errs = append(errs, s.site.errorf(configField(err), err, "%v", err))
			continue
		}
		u.up = up
		ts.upstreams = append(ts.upstreams, u)
	}
	var imported []built
	for _, u := range ts.upstreams {
		s, up, name := u.server, u.up, u.server.Config.Name
		listed, err := up.ListTools(ctx)
		if errors.Is(err, mcptool.ErrUnavailable) && !cannotRun(err) {
			ts.log.Warn(
				"mcp server cannot be reached at start: its tools are listed as unavailable until it is, and it is tried again in the background",
				"mcp_server", name, "imports_waiting", s.Import != nil, "error", err)
			for _, m := range f.MCPTools {
				if m.Server != name {
					continue
				}
				t, err := m.standIn(up)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				all = append(all, built{t, m.Line, m.site})
				u.names = append(u.names, t.Name())
				// Built again once the server is reached, as at start: with
				// its schema or description where the file gives none, and
				// refused if the server lists no such tool.
				u.pending = append(u.pending, m)
			}
			u.imports = s.Import != nil
			continue
		}
		if err != nil {
			errs = append(errs, s.site.errorf("", err, "%v", err))
			continue
		}
		for _, m := range f.MCPTools {
			if m.Server != name {
				continue
			}
			t, err := m.build(up, listed)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			all = append(all, built{t, m.Line, m.site})
			u.names = append(u.names, t.Name())
		}
		if s.Import == nil {
			continue
		}
		tools, err := up.Import(ctx, *s.Import)
		if err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, s.importError(e))
			}
			continue
		}
		for _, t := range tools {
			imported = append(imported, built{t, s.Line, s.site})
			u.names = append(u.names, t.Name())
		}
	}
	for _, u := range ts.upstreams {
		slices.Sort(u.names)
	}
	first := map[string]built{}
	for _, d := range f.NATSTools {
		first[d.Spec.Name] = built{line: d.Line, site: d.site}
		ts.nats = append(ts.nats, d.Pending())
	}
	slices.SortStableFunc(all, func(a, b built) int { return cmp.Compare(a.line, b.line) })
	all = append(all, imported...)
	for _, b := range all {
		if prev, dup := first[b.t.Name()]; dup {
			field := "name"
			if b.site.server {
				field = "import"
			}
			errs = append(errs, b.site.errorf(field, tool.ErrDuplicateTool, "tool %q is also declared at line %d", b.t.Name(), prev.line))
			continue
		}
		first[b.t.Name()] = b
		ts.tools = append(ts.tools, b.t)
	}
	if len(errs) > 0 {
		ts.Close()
		slices.SortStableFunc(errs, func(a, b error) int {
			var ea, eb *Error
			errors.As(a, &ea)
			errors.As(b, &eb)
			return cmp.Compare(ea.Line, eb.Line)
		})
		return nil, errors.Join(errs...)
	}
	return ts, nil
}

// cannotRun reports whether a stdio server's command could not be run at all
// (no such program or directory, not executable): waiting for it would not
// help, so it stops Open like a configuration error.
func cannotRun(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
}

// configField is the field an error from mcptool.Open is about: that of a
// *mcptool.ConfigError, the entry as a whole otherwise.
func configField(err error) string {
	var ce *mcptool.ConfigError
	if errors.As(err, &ce) {
		return ce.Field
	}
	return ""
}

// importError places an error of the server's import: on the override or
// exclusion that names the tool when there is one, on the import otherwise.
func (s Server) importError(err error) *Error {
	var ie *mcptool.ImportError
	if !errors.As(err, &ie) {
		return s.site.errorf("import", err, "%v", err)
	}
	override := "import.tools." + ie.Tool
	_, overridden := s.Import.Tools[ie.Tool]
	var se *tool.SpecError
	switch {
	case overridden && errors.As(ie.Err, &se):
		return s.site.locate(ie.Err, override+".")
	case errors.Is(ie.Err, mcptool.ErrUnknownTool) && overridden:
		return s.site.errorf(override, err, "the server lists no tool %q", ie.Tool)
	case errors.Is(ie.Err, mcptool.ErrUnknownTool):
		e := s.site.errorf("import.exclude", err, "the server lists no tool %q", ie.Tool)
		if l, ok := s.site.lines["import.exclude/"+ie.Tool]; ok {
			e.Line = l
		}
		return e
	}
	return s.site.errorf("import", err, "tool %q: %v", ie.Tool, ie.Err)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
