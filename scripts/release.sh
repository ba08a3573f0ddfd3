#!/usr/bin/env bash
# Builds what a release of toolexec ships, into dist/, and checks it:
#
#   - executor and emitter for linux and darwin, amd64 and arm64 (go build
#     -trimpath, CGO off), one archive per program and platform,
#     <program>_<release>_<os>_<arch>.tar.gz, holding the program, README.md
#     and CHANGELOG.md;
#   - a CycloneDX SBOM (JSON) of each program on each platform, made by
#     cyclonedx-gomod from the binary's build information (the modules linked
#     in, and the Go standard library), <archive>.cdx.json;
#   - the Python package's sdist and wheel (python -m build);
#   - SHA256SUMS, the SHA-256 of every file above (sha256sum -c reads it).
#
# The version is the one the source names (internal/buildinfo.Release): no
# flag overrides it. A release (no option) refuses to build unless Release has
# no -dev suffix, the work tree is clean, HEAD is tagged v<Release> and
# CHANGELOG.md dates the release; --snapshot builds whatever the tree holds.
#
# Then it checks what it built: each archive's binary names the version (the
# binary of this machine's platform is run with --version; the others are read
# with go version -m and searched for the version string, since they cannot
# run here) and was built for its platform with -trimpath; SHA256SUMS matches
# and lists every file; each SBOM is valid CycloneDX JSON (the schema of its
# specVersion, by cyclonedx-python-lib) describing its program; the wheel and
# the sdist carry the release in PEP 440 spelling, and the wheel, installed in
# a venv, imports as that version. It ends with a table of the files, their
# sizes and what each binary reports, and the time it took.
#
#   scripts/release.sh [--snapshot]      (make release, make release-check)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

PLATFORMS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"
PROGRAMS="executor emitter"
MODULE=github.com/tesserix/toolexec
# The Python tools, from PyPI at exact versions, in a venv of their own.
BUILD_VERSION=1.6.1
CYCLONEDX_PYTHON_LIB_VERSION=11.12.0

DIST=${DIST:-dist}
BIN=${BIN:-bin}
PYTHON=${PYTHON:-python3}
VENV=$BIN/release-venv

snapshot=""
case "${1:-}" in
  --snapshot) snapshot=1 ;;
  "") ;;
  *) echo "usage: scripts/release.sh [--snapshot]" >&2; exit 2 ;;
esac

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'release: %s\n' "$*" >&2; exit 1; }

start=$SECONDS
release=$(sed -n 's/^const Release = "\(.*\)"$/\1/p' internal/buildinfo/buildinfo.go)
[ -n "$release" ] || die "internal/buildinfo/buildinfo.go declares no const Release"
version=v$release
pyversion=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' python/src/toolexec/_version.py)
[ -n "$pyversion" ] || die "python/src/toolexec/_version.py declares no __version__"

if [ -z "$snapshot" ]; then
  case "$release" in *-dev*) die "Release is $release: a release has no -dev suffix (make release-check builds a snapshot)" ;; esac
  [ -z "$(git status --porcelain)" ] || die "the work tree has changes: a release is built from the tagged commit as it is"
  git tag --points-at HEAD | grep -qx "$version" || die "HEAD is not tagged $version"
  grep -Eq "^## \[$release\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" CHANGELOG.md || die "CHANGELOG.md has no dated entry ## [$release] - YYYY-MM-DD"
  vcs=true # the revision goes into the binaries (go version -m, --version)
else
  vcs=auto # the revision when the tree is a git checkout
fi

log "toolexec $version ($([ -n "$snapshot" ] && echo snapshot || echo release)) into $DIST/"
eval "$(scripts/tools.sh cyclonedx-gomod)"
rm -rf "$DIST"
mkdir -p "$DIST" "$BIN"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Archives carry the commit's time, and tar and gzip write no other, so that
# the same commit gives the same archives.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)

for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  for prog in $PROGRAMS; do
    name=${prog}_${release}_${os}_${arch}
    log "$name"
    mkdir -p "$stage/$name"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=$vcs -ldflags="-s -w" \
      -o "$stage/$name/$prog" "./cmd/$prog"
    cp README.md CHANGELOG.md "$stage/$name/"
    tar -C "$stage" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -cf - "$name" |
      gzip -n -9 >"$DIST/$name.tar.gz"
    # From the binary's own build information (go version -m): the modules
    # linked into this program on this platform, and the Go standard library.
    cyclonedx-gomod bin -json -std -version "$version" \
      -output "$DIST/$name.cdx.json" "$stage/$name/$prog" 2>"$stage/$name.sbom.log" ||
      { cat "$stage/$name.sbom.log" >&2; die "cyclonedx-gomod failed for $name"; }
  done
done

log "the Python package's sdist and wheel (build $BUILD_VERSION)"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip show build 2>/dev/null | grep -qx "Version: $BUILD_VERSION"; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "build==$BUILD_VERSION" "cyclonedx-python-lib[json-validation]==$CYCLONEDX_PYTHON_LIB_VERSION"
fi
"$VENV/bin/python" -m build --sdist --wheel --outdir "$DIST" python >"$stage/python-build.log" 2>&1 ||
  { cat "$stage/python-build.log" >&2; die "python -m build failed"; }

(cd "$DIST" && sha256sum -- *.tar.gz *.whl *.cdx.json >SHA256SUMS)

# ---- the checks ----------------------------------------------------------

log "checking $DIST/"
fail() { printf 'release check: %s\n' "$*" >&2; failed=1; }
failed=""
host=$(go env GOHOSTOS)/$(go env GOHOSTARCH)
report=()

for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  for prog in $PROGRAMS; do
    name=${prog}_${release}_${os}_${arch}
    archive=$DIST/$name.tar.gz
    [ -f "$archive" ] || { fail "$archive is missing"; continue; }
    mkdir -p "$stage/check"
    tar -C "$stage/check" -xzf "$archive"
    bin=$stage/check/$name/$prog
    [ -x "$bin" ] || { fail "$archive holds no $name/$prog"; continue; }
    for f in README.md CHANGELOG.md; do
      [ -f "$stage/check/$name/$f" ] || fail "$archive holds no $name/$f"
    done
    meta=$(go version -m "$bin")
    for want in "path	$MODULE/cmd/$prog" "build	-trimpath=true" "build	CGO_ENABLED=0" "build	GOOS=$os" "build	GOARCH=$arch"; do
      grep -qF "$want" <<<"$meta" || fail "$name: go version -m has no line \"$want\""
    done
    if [ -z "$snapshot" ]; then
      # The go command names the main module after the tag of a clean checkout.
      grep -qF "mod	$MODULE	$version" <<<"$meta" || fail "$name: go version -m does not name $MODULE $version"
    fi
    if [ "$platform" = "$host" ]; then
      says=$("$bin" --version) || fail "$name: --version exited $?"
      [[ "$says" == "$prog version $version "* ]] || fail "$name: --version says \"$says\", not $version"
      how="runs: $says"
    else
      grep -aqF "$version" "$bin" || fail "$name: the binary holds no \"$version\""
      revision=$(sed -n 's/^[[:space:]]*build[[:space:]]*vcs.revision=\(.\{12\}\).*/\1/p' <<<"$meta")
      how="holds $version (go version -m: $os/$arch, -trimpath${revision:+, revision $revision})"
    fi
    report+=("$(printf '%-46s %10s  %s' "$name.tar.gz" "$(stat -c %s "$archive")" "$how")")
    rm -rf "$stage/check"
  done
done

if ! (cd "$DIST" && sha256sum --quiet -c SHA256SUMS); then
  fail "SHA256SUMS does not match the files"
fi
for f in "$DIST"/*; do
  b=$(basename "$f")
  [ "$b" = SHA256SUMS ] && continue
  grep -q "  $b\$" "$DIST/SHA256SUMS" || fail "SHA256SUMS does not list $b"
done

# The SBOMs against the CycloneDX schema of their specVersion, and the
# Python distributions' metadata.
"$VENV/bin/python" - "$DIST" "$MODULE" "$pyversion" <<'EOF' || failed=1
import json, sys, tarfile, zipfile
from pathlib import Path
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

dist, module, pyversion = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
bad = False
sboms = sorted(dist.glob("*.cdx.json"))
if not sboms:
    print("release check: no SBOM in", dist, file=sys.stderr)
    bad = True
for path in sboms:
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    prog = path.name.split("_")[0]
    problems = []
    if doc.get("bomFormat") != "CycloneDX":
        problems.append(f"bomFormat is {doc.get('bomFormat')!r}")
    else:
        err = JsonStrictValidator(SchemaVersion.from_version(doc["specVersion"])).validate_str(text)
        if err is not None:
            problems.append(f"not valid CycloneDX {doc['specVersion']}: {err}")
    main = doc.get("metadata", {}).get("component", {})
    if main.get("name") != f"{module}/cmd/{prog}" and main.get("name") != module:
        problems.append(f"describes {main.get('name')!r}, not {module}/cmd/{prog}")
    if not doc.get("components"):
        problems.append("lists no components")
    for p in problems:
        print(f"release check: {path.name}: {p}", file=sys.stderr)
    bad = bad or bool(problems)

wheels = list(dist.glob(f"toolexec-{pyversion}-*.whl"))
sdists = list(dist.glob(f"toolexec-{pyversion}.tar.gz"))
if len(wheels) != 1 or len(sdists) != 1:
    print(f"release check: want one wheel and one sdist of toolexec {pyversion}, found"
          f" {[w.name for w in wheels]} and {[s.name for s in sdists]}", file=sys.stderr)
    sys.exit(1)
with zipfile.ZipFile(wheels[0]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
with tarfile.open(sdists[0]) as t:
    info = t.extractfile(f"toolexec-{pyversion}/PKG-INFO")
    lines += info.read().decode().splitlines() if info else []
versions = [l.split(": ", 1)[1] for l in lines if l.startswith("Version: ")]
if versions != [pyversion, pyversion]:
    print(f"release check: the wheel and sdist say versions {versions}, want {pyversion}", file=sys.stderr)
    bad = True
sys.exit(1 if bad else 0)
EOF

# The wheel, installed in a venv of its own with its dependencies, is the
# version it says.
pyvenv=$stage/wheel-venv
"$PYTHON" -m venv "$pyvenv"
"$pyvenv/bin/python" -m pip install --quiet --disable-pip-version-check "$DIST"/toolexec-"$pyversion"-*.whl
pysays=$("$pyvenv/bin/python" -c 'import toolexec; print(toolexec.__version__)')
[ "$pysays" = "$pyversion" ] || fail "the installed wheel says toolexec.__version__ = $pysays, want $pyversion"

[ -z "$failed" ] || die "the checks of $DIST/ failed (above)"

printf '\ntoolexec %s, in %s/:\n' "$version" "$DIST"
printf '%s\n' "${report[@]}"
for f in "$DIST"/*.cdx.json "$DIST"/*.whl "$DIST"/toolexec-*.tar.gz "$DIST"/SHA256SUMS; do
  how=""
  case "$f" in
    *.cdx.json) how="CycloneDX $(sed -n 's/.*"specVersion": *"\([^"]*\)".*/\1/p' "$f" | head -1), valid" ;;
    *.whl) how="imports as toolexec $pysays" ;;
    *.tar.gz) how="sdist, PKG-INFO Version $pyversion" ;;
    *SHA256SUMS) how="sha256sum -c: OK, $(wc -l <"$f") files" ;;
  esac
  printf '%-46s %10s  %s\n' "$(basename "$f")" "$(stat -c %s "$f")" "$how"
done
printf 'built and checked in %ds\n' "$((SECONDS - start))"
