package toolexec

import "github.com/tesserix/toolexec/internal/buildinfo"

// Version is the release of toolexec this module is, without the leading
// "v": "0.1.0" at the tag v0.1.0, and the next release with a "-dev" suffix
// between releases. Both programs' --version, the toolexec_build_info metric,
// the MCP serverInfo of the gateway and the Python package's __version__
// (in PEP 440 spelling) name the same release.
const Version = buildinfo.Release
