// Package buildinfo says which build of toolexec is running: the module
// version, the VCS revision and the Go version, as the Go toolchain recorded
// them in the binary. The programs print it for --version, the executor
// exports it as the toolexec_build_info metric, and MCP handshakes name it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// ModulePath is the path of toolexec's Go module.
const ModulePath = "github.com/tesserix/toolexec"

// version may be set at link time, for builds without VCS information (a
// container build whose context holds no .git):
//
//	go build -ldflags "-X github.com/tesserix/toolexec/internal/buildinfo.version=v1.2.3"
var version string

// Info describes one build.
type Info struct {
	// Version is the module version: a release tag, a pseudo-version derived
	// from the VCS, the link-time override, or "(devel)" when none is known.
	Version string
	// Revision is the VCS commit the binary was built from, "" if unknown.
	Revision string
	// Modified reports that the working tree had uncommitted changes.
	Modified bool
	// GoVersion is the Go release that built the binary.
	GoVersion string
}

// String formats the build for a --version line.
func (i Info) String() string {
	s := i.Version
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if i.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + i.GoVersion
}

// Get returns the running binary's build information.
var Get = sync.OnceValue(func() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.Version = moduleVersion(bi)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		info.Version = version
	}
	return info
})

// moduleVersion finds toolexec's version in bi: the main module's when a
// toolexec program runs, the dependency's when toolexec is a library.
func moduleVersion(bi *debug.BuildInfo) string {
	if bi.Main.Path == ModulePath && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == ModulePath && d.Version != "" {
			return d.Version
		}
	}
	return "(devel)"
}
