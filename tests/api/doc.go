// Package api holds each release's promises to the one before it. The folder
// api/ at the root is the baseline: what the last release (before the first
// one, the API as it was last taken in) offered users, in five files:
//
//   - RELEASE: the release the baseline is of (internal/buildinfo.Release
//     when it was written);
//   - go.zip: the exported API of every Go package outside internal/, cmd/,
//     examples/ and tests/, as apidiff (golang.org/x/exp/cmd/apidiff, built
//     by scripts/tools.sh at a pinned version) writes export data;
//   - python.txt: the Python package's public names
//     (python/tests/public_api.txt);
//   - WIRE_VERSION: the wire version (tests/wire's goldens);
//   - keys.json: the published key vectors (schemas/vectors/keys.json).
//
// TestReleaseRules compares the code with it. An incompatible change (apidiff's
// word for Go; a Python name removed or changed; a new wire version; a vector
// whose key the code now derives otherwise) fails unless CHANGELOG.md lists it
// under Changed or Removed, in its Unreleased section or the section of a
// release after the baseline's, naming it (a Go package or identifier, a
// Python name, "wire version N", "key derivation"), and the release
// internal/buildinfo declares is a major version after the baseline's (a
// minor one while that is v0; a key derivation change is major even then).
// A compatible change (an addition) passes.
//
// make api-snapshot writes the baseline anew (go test ./tests/api -update): when
// a release is cut (a Release without -dev), and, until the first release,
// whenever the API is meant to be what the code says. TestChangelogShape
// holds CHANGELOG.md to its format. It has no Go API.
package api
