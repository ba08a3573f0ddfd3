#!/usr/bin/env bash
# Builds the Go programs that some tests, pages and targets need beyond the
# module's own: helm (tests/opskit, deploy/README.md), the nats CLI (tests/docs,
# README.md), apidiff (tests/api: the exported Go API against the release
# baseline in api/) and cyclonedx-gomod (make release: the SBOMs).
# Each is built at a pinned version from the Go module proxy (go install, outside
# the project's go.mod) into a folder of its own under the cache,
# ${XDG_CACHE_HOME:-~/.cache}/toolexec/tools/<name>-<version>, and kept while the
# binary there is that version. The first build takes minutes.
#
# Progress goes to standard error; standard output is one line that puts the
# folders first on PATH:
#
#   eval "$(scripts/tools.sh)"      # or: eval "$(make -s tools)"
#
# Names as arguments build only those: scripts/tools.sh apidiff cyclonedx-gomod.
set -euo pipefail
export PATH="/usr/local/go/bin:$PATH"

HELM_VERSION=v4.3.2
NATS_CLI_VERSION=v0.5.1
APIDIFF_VERSION=v0.0.0-20261113113407-e3970619a1a4 # golang.org/x/exp
CYCLONEDX_GOMOD_VERSION=v1.10.0

cache="${XDG_CACHE_HOME:-$HOME/.cache}/toolexec/tools"
path=""
wanted=("$@")

tool() { # name, package, module, version
  local name=$1 pkg=$2 mod=$3 version=$4
  if [ "${#wanted[@]}" -gt 0 ] && [[ " ${wanted[*]} " != *" $name "* ]]; then
    return
  fi
  local dir="$cache/$name-$version"
  if [ -x "$dir/$name" ] && go version -m "$dir/$name" 2>/dev/null | grep -q "^[[:space:]]*mod[[:space:]]*$mod[[:space:]]*$version[[:space:]]"; then
    echo "$name $version is built: $dir/$name" >&2
  else
    echo "building $name $version into $dir (go install; the first time takes minutes)" >&2
    mkdir -p "$dir"
    (cd "$dir" && GOFLAGS= GOBIN="$dir" go install "$pkg@$version")
  fi
  path="$path$dir:"
}

tool helm helm.sh/helm/v4/cmd/helm helm.sh/helm/v4 "$HELM_VERSION"
tool nats github.com/nats-io/natscli/nats github.com/nats-io/natscli "$NATS_CLI_VERSION"
tool apidiff golang.org/x/exp/cmd/apidiff golang.org/x/exp "$APIDIFF_VERSION"
tool cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod "$CYCLONEDX_GOMOD_VERSION"

printf 'export PATH="%s$PATH"\n' "$path"
