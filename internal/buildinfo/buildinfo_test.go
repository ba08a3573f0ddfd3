package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"main module", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v1.4.0"}}, "v1.4.0"},
		{"as a dependency", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/agent", Version: "v0.1.0"},
			Deps: []*debug.Module{{Path: "example.com/other", Version: "v9"}, {Path: ModulePath, Version: "v1.5.0"}},
		}, "v1.5.0"},
		{"another program", debug.BuildInfo{Main: debug.Module{Path: "example.com/agent", Version: "v0.1.0"}}, "(devel)"},
		{"no version recorded", debug.BuildInfo{Main: debug.Module{Path: ModulePath}}, "(devel)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := moduleVersion(&c.bi); got != c.want {
				t.Fatalf("moduleVersion = %q, want %q", got, c.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	cases := []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.0.0", GoVersion: "go1.26.8"}, "v1.0.0 go1.26.8"},
		{Info{Version: "(devel)", Revision: "0fc2392abcdef0123456789", GoVersion: "go1.26.8"}, "(devel) (0fc2392abcde) go1.26.8"},
		{Info{Version: "(devel)", Revision: "0fc2392", Modified: true, GoVersion: "go1.26.8"}, "(devel) (0fc2392, modified) go1.26.8"},
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
