// Package buildinfo says which build of toolexec is running: the release its
// source names, and the VCS revision and Go version the Go toolchain recorded
// in the binary. The programs print it for --version, the executor
// exports it as the toolexec_build_info metric, and MCP handshakes name it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// ModulePath is the path of toolexec's Go module.
const ModulePath = "github.com/tesserix/toolexec"

// Release is the release of toolexec this source tree is, in semantic
// versioning without the leading "v": the tag of the Go module's release is
// "v" + Release, and the Python package (python/) carries the same release in
// PEP 440's spelling (0.1.0-dev there is 0.1.0.dev0, 0.1.0-rc.1 is 0.1.0rc1).
// Between releases it names the next one with a "-dev" suffix.
const Release = "0.1.0-dev"

// Info describes one build.
type Info struct {
	// Version is "v" + [Release].
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
	info := Info{Version: "v" + Release, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	return info
})
