package buildinfo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pep440 spells a Release the way Python packaging does, or returns false
// for a release the Python package has no agreed spelling of.
func pep440(release string) (string, bool) {
	core, pre, _ := strings.Cut(release, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return "", false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" || (len(p) > 1 && p[0] == '0') {
			return "", false
		}
	}
	switch {
	case pre == "":
		return core, true
	case pre == "dev":
		return core + ".dev0", true
	}
	for _, tag := range []string{"alpha", "beta", "rc"} {
		n, ok := strings.CutPrefix(pre, tag+".")
		if ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return core + map[string]string{"alpha": "a", "beta": "b", "rc": "rc"}[tag] + n, true
		}
	}
	return "", false
}

func TestPEP440(t *testing.T) {
	cases := []struct{ release, want string }{
		{"0.1.0", "0.1.0"},
		{"0.1.0-dev", "0.1.0.dev0"},
		{"1.2.3-rc.1", "1.2.3rc1"},
		{"1.2.3-beta.2", "1.2.3b2"},
		{"2.0.0-alpha.10", "2.0.0a10"},
		{"1.2", ""},
		{"1.2.3-dev.1", ""},
		{"01.2.3", ""},
		{"1.2.3-rc", ""},
		{"1.2.x", ""},
	}
	for _, c := range cases {
		got, ok := pep440(c.release)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("pep440(%q) = %q, %v; want %q", c.release, got, ok, c.want)
		}
	}
}

// TestPythonPackageInStep: the Python package names the release the Go
// module names, in its own spelling; a release that Python cannot spell is
// refused here rather than at packaging time.
func TestPythonPackageInStep(t *testing.T) {
	want, ok := pep440(Release)
	if !ok {
		t.Fatalf("Release %q has no PEP 440 spelling: use X.Y.Z, X.Y.Z-dev, or X.Y.Z-{alpha,beta,rc}.N", Release)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "python", "src", "toolexec", "_version.py"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^__version__ = "([^"]*)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatal(`python/src/toolexec/_version.py has no line __version__ = "..."`)
	}
	if got := string(m[1]); got != want {
		t.Fatalf("the Python package is %s, the Go module v%s: python/src/toolexec/_version.py should say %q", got, Release, want)
	}
}

func TestGetNamesTheRelease(t *testing.T) {
	if got := Get().Version; got != "v"+Release {
		t.Fatalf("Get().Version = %q, want %q", got, "v"+Release)
	}
}

func TestString(t *testing.T) {
	cases := []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.0.0", GoVersion: "go1.26.8"}, "v1.0.0 go1.26.8"},
		{Info{Version: "v0.1.0-dev", Revision: "0fc2392abcdef0123456789", GoVersion: "go1.26.8"}, "v0.1.0-dev (0fc2392abcde) go1.26.8"},
		{Info{Version: "v0.1.0-dev", Revision: "0fc2392", Modified: true, GoVersion: "go1.26.8"}, "v0.1.0-dev (0fc2392, modified) go1.26.8"},
	}
	for _, c := range cases {
		if got := c.info.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestGetNamesTheGoRelease(t *testing.T) {
	info := Get()
	if !strings.HasPrefix(info.GoVersion, "go") || info.Version == "" {
		t.Fatalf("Get() = %+v", info)
	}
}
