package compose_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// composeFile is docker-compose.yml, as much of it as the tests read.
type composeFile struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string               `yaml:"image"`
	Build       any                  `yaml:"build"`
	Command     []string             `yaml:"command"`
	Entrypoint  []string             `yaml:"entrypoint"`
	Environment map[string]string    `yaml:"environment"`
	Ports       []string             `yaml:"ports"`
	Volumes     []string             `yaml:"volumes"`
	DependsOn   map[string]dependsOn `yaml:"depends_on"`
	Healthcheck *healthcheck         `yaml:"healthcheck"`
	Restart     string               `yaml:"restart"`
	Profiles    []string             `yaml:"profiles"`
}

type dependsOn struct {
	Condition string `yaml:"condition"`
}

type healthcheck struct {
	Test    []string `yaml:"test"`
	Disable bool     `yaml:"disable"`
}

// oneShot reports whether s is a command-line tool run with `docker compose
// run` (the tools profile) rather than a service that stays up.
func (s service) oneShot() bool {
	for _, p := range s.Profiles {
		if p == "tools" {
			return true
		}
	}
	return false
}

// loadCompose parses docker-compose.yml.
func loadCompose(t *testing.T) (composeFile, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return f, string(b)
}

// header returns the commands of docker-compose.yml's header: its comment
// lines indented by three spaces or more.
func header(t *testing.T, text string) []string {
	t.Helper()
	var cmds []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if c, ok := strings.CutPrefix(line, "#   "); ok && strings.TrimSpace(c) != "" {
			cmds = append(cmds, strings.TrimSpace(c))
		}
	}
	if len(cmds) == 0 {
		t.Fatal("docker-compose.yml's header shows no commands")
	}
	return cmds
}

// interpolation matches a compose variable: ${NAME}, ${NAME:-default},
// ${NAME:?message}.
var interpolation = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// resolve substitutes compose variables in s from env, as compose does for
// the forms the file uses.
func resolve(s string, env map[string]string) string {
	return interpolation.ReplaceAllStringFunc(s, func(m string) string {
		p := interpolation.FindStringSubmatch(m)
		v, ok := env[p[1]]
		if (!ok || v == "") && strings.HasPrefix(p[2], ":-") {
			return p[3]
		}
		return v
	})
}

// readEnvFile parses a .env file: NAME=value lines, # comments.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not NAME=value: %q", path, line)
		}
		env[k] = v
	}
	return env
}

// goTool is the go command.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// build builds the module's command pkg (./cmd/executor) into dir.
func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command(goTool(), "build", "-o", bin, pkg)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out.String())
	}
	return bin
}
