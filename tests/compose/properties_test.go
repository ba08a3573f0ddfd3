package compose_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestServicesHeal: every service that stays up has a healthcheck and
// restarts unless stopped; the command-line tools say they have neither on
// purpose; every depends_on waits for a healthy service that has a check.
func TestServicesHeal(t *testing.T) {
	f, _ := loadCompose(t)
	for _, want := range []string{"nats", "postgres", "redis", "executor", "prometheus", "grafana", "emitter"} {
		if _, ok := f.Services[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	for name, s := range f.Services {
		if s.oneShot() {
			if s.Healthcheck == nil || !s.Healthcheck.Disable || s.Restart != "no" {
				t.Errorf("%s (a tool run with compose run): want healthcheck disable: true and restart: \"no\"", name)
			}
		} else {
			if s.Healthcheck == nil || s.Healthcheck.Disable || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" && s.Healthcheck.Test[0] != "CMD-SHELL" {
				t.Errorf("%s: no healthcheck test: %+v", name, s.Healthcheck)
			}
			if s.Restart != "unless-stopped" {
				t.Errorf("%s: restart %q, want unless-stopped", name, s.Restart)
			}
		}
		for dep, d := range s.DependsOn {
			if d.Condition != "service_healthy" {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", name, dep, d.Condition)
			}
			if ds, ok := f.Services[dep]; !ok || ds.Healthcheck == nil || ds.Healthcheck.Disable {
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}
	// The executor must wait for all it may connect to, whichever store is chosen.
	for _, dep := range []string{"nats", "postgres", "redis"} {
		if _, ok := f.Services["executor"].DependsOn[dep]; !ok {
			t.Errorf("the executor does not wait for %s", dep)
		}
	}
	// Its healthcheck is the executor's own probe (the image has no shell or curl).
	if got := strings.Join(f.Services["executor"].Healthcheck.Test, " "); got != "CMD /usr/local/bin/executor healthcheck" {
		t.Errorf("executor healthcheck %q", got)
	}
}

// TestDependsOnIsAMap climbs the fence the list form of depends_on would
// open: a list waits only for containers to start. The raw YAML is read, so
// that a list cannot hide behind the struct's decoding.
func TestDependsOnIsAMap(t *testing.T) {
	_, text := loadCompose(t)
	var raw struct {
		Services map[string]map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatal(err)
	}
	for name, s := range raw.Services {
		if d, ok := s["depends_on"]; ok {
			if _, isMap := d.(map[string]any); !isMap {
				t.Errorf("%s: depends_on is %T, want a map with conditions", name, d)
			}
		}
	}
}

// TestPortsOnLoopback: only loopback ports are published, and only those a
// user needs: NATS, Prometheus and Grafana; never PostgreSQL or Redis.
func TestPortsOnLoopback(t *testing.T) {
	f, _ := loadCompose(t)
	published := map[string]bool{}
	for name, s := range f.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q: bind it to 127.0.0.1", name, p)
			}
			published[name] = true
		}
	}
	for _, name := range []string{"postgres", "redis", "executor"} {
		if published[name] {
			t.Errorf("%s is published on the host; nothing outside compose needs it", name)
		}
	}
	for _, name := range []string{"nats", "prometheus", "grafana"} {
		if !published[name] {
			t.Errorf("%s is not published", name)
		}
	}
}

// required matches a compose variable compose refuses to start without.
var required = regexp.MustCompile(`^\$\{[A-Z_][A-Z0-9_]*:\?[^}]+\}$`)

// TestNoPasswordInTheFile: every password, alone or inside a URL, is a
// ${VAR:?message} from .env, never a value written in the file nor one put
// on a command line, and .env.example holds none while .env is ignored by git.
func TestNoPasswordInTheFile(t *testing.T) {
	f, text := loadCompose(t)
	userinfo := regexp.MustCompile(`^[a-z]+://([^@/]*)@`)
	checked := 0
	for name, s := range f.Services {
		values := map[string]string{}
		for k, v := range s.Environment {
			values[k] = v
		}
		for _, c := range append(slices.Clone(s.Entrypoint), s.Command...) {
			// A secret on a command line shows in docker inspect and ps: it
			// must come from the environment (a $$VAR the container's shell
			// reads).
			if strings.Contains(c, "--requirepass") || interpolation.MatchString(c) && strings.Contains(c, "PASSWORD") {
				t.Errorf("%s: a secret on the command line (%q): docker inspect and ps show it", name, c)
			}
		}
		for k, v := range values {
			secret := ""
			switch {
			case strings.Contains(k, "PASSWORD") || strings.HasSuffix(k, "_AUTH"):
				secret = v
			case userinfo.MatchString(v):
				_, secret, _ = strings.Cut(userinfo.FindStringSubmatch(v)[1], ":")
			default:
				continue
			}
			checked++
			if !required.MatchString(secret) {
				t.Errorf("%s %s: %q is not a ${VAR:?message} from .env", name, k, secret)
			}
		}
	}
	if checked < 6 {
		t.Errorf("only %d secrets found; the test has lost track of the file", checked)
	}
	if strings.Contains(text, "toolexec@") || strings.Contains(text, "POSTGRES_PASSWORD: toolexec") {
		t.Error("the old fixed password is back")
	}

	example := readEnvFile(t, filepath.Join(root, ".env.example"))
	for _, v := range interpolation.FindAllStringSubmatch(text, -1) {
		if v[2] == ":?" {
			got, ok := example[v[1]]
			if !ok {
				t.Errorf(".env.example does not list %s, which compose requires", v[1])
			} else if got != "" {
				t.Errorf(".env.example gives %s a value; a copy would start with a known password", v[1])
			}
		}
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil || !regexp.MustCompile(`(?m)^/?\.env$`).Match(ignore) {
		t.Error(".gitignore does not ignore .env")
	}
	dockerignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil || !regexp.MustCompile(`(?m)^/?\.env$`).Match(dockerignore) {
		t.Error(".dockerignore does not keep .env out of the image's build context")
	}
}

// TestNATSImageMatchesEmbeddedServer: the compose file's NATS is the minor
// release of the nats-server module the executor embeds.
func TestNATSImageMatchesEmbeddedServer(t *testing.T) {
	f, _ := loadCompose(t)
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	req := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 (v(\d+\.\d+)\.\S+)`).FindStringSubmatch(string(b))
	if req == nil {
		t.Fatal("go.mod requires no github.com/nats-io/nats-server/v2")
	}
	embedded, m := req[1], req[1:]
	img := f.Services["nats"].Image
	tag := regexp.MustCompile(`^nats:(\d+\.\d+)(\.\d+)?(-[a-z0-9.]+)?$`).FindStringSubmatch(img)
	if tag == nil || tag[1] != m[1] {
		t.Errorf("NATS image %q; want nats:%s[-variant], the minor release of the embedded %s", img, m[1], embedded)
	}
	// The healthcheck runs wget, which only the alpine variant has.
	if !strings.Contains(img, "alpine") {
		t.Errorf("NATS image %q has no shell tools for its healthcheck", img)
	}
}

// TestExecutorEnvironment: the executor is told to ensure the PostgreSQL
// schema, serves the metrics port Prometheus scrapes, and every TOOLEXEC_
// variable it is given is one the executor reads (TestExecutorAsComposed runs
// it with them).
func TestExecutorEnvironment(t *testing.T) {
	f, _ := loadCompose(t)
	env := f.Services["executor"].Environment
	if env["TOOLEXEC_ENSURE_SCHEMA"] != "true" {
		t.Errorf("TOOLEXEC_ENSURE_SCHEMA = %q; switching to postgres would find no schema", env["TOOLEXEC_ENSURE_SCHEMA"])
	}
	help := executorHelp(t)
	for k := range env {
		name, ok := strings.CutPrefix(k, "TOOLEXEC_")
		if !ok {
			continue
		}
		// A flag's variable, or one the help names (the connection options'
		// variables keep their old names: TOOLEXEC_NATS_URL for --server).
		flag := "--" + strings.ReplaceAll(strings.ToLower(name), "_", "-")
		if !strings.Contains(help, flag+" ") && !strings.Contains(help, k) {
			t.Errorf("%s is neither the variable of a flag `executor --help` lists (%s) nor one it names", k, flag)
		}
	}
	_, port, ok := strings.Cut(env["TOOLEXEC_METRICS_ADDR"], ":")
	if !ok {
		t.Fatalf("TOOLEXEC_METRICS_ADDR %q", env["TOOLEXEC_METRICS_ADDR"])
	}

	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName     string `yaml:"job_name"`
			DNSSDConfig []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/compose/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &prom); err != nil {
		t.Fatal(err)
	}
	scraped := false
	for _, sc := range prom.ScrapeConfigs {
		for _, d := range sc.DNSSDConfig {
			if strings.Join(d.Names, ",") == "executor" && d.Type == "A" && port == strconv.Itoa(d.Port) {
				scraped = true
			}
		}
	}
	if !scraped {
		t.Errorf("prometheus.yml does not scrape every executor (DNS A records of executor, port %s): %+v", port, prom.ScrapeConfigs)
	}
	mounts := mountTargets(f.Services["prometheus"])
	for _, r := range prom.RuleFiles {
		if src, ok := mounts[r]; !ok || src != "./deploy/prometheus/alerts.yml" {
			t.Errorf("rule file %s is not deploy/prometheus/alerts.yml mounted (%q)", r, src)
		}
	}
	if len(prom.RuleFiles) == 0 {
		t.Error("Prometheus loads no alert rules")
	}
}

// TestGrafanaProvisioned: Grafana gets the compose file's Prometheus as its
// data source and loads deploy/grafana/toolexec.json from the folder its
// dashboard provider reads.
func TestGrafanaProvisioned(t *testing.T) {
	f, _ := loadCompose(t)
	mounts := mountTargets(f.Services["grafana"])
	var ds struct {
		Datasources []struct {
			Type, URL string
			IsDefault bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, "deploy/compose/grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" || !ds.Datasources[0].IsDefault {
		t.Errorf("data sources %+v; want the compose file's Prometheus, the default", ds.Datasources)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "deploy/compose/grafana/provisioning/dashboards/toolexec.yml", &prov)
	if len(prov.Providers) != 1 {
		t.Fatalf("dashboard providers %+v", prov.Providers)
	}
	found := false
	for target, src := range mounts {
		if src == "./deploy/grafana/toolexec.json" && filepath.Dir(target) == prov.Providers[0].Options.Path {
			found = true
		}
	}
	if !found {
		t.Errorf("deploy/grafana/toolexec.json is not mounted in %s, the provider's folder (mounts %v)", prov.Providers[0].Options.Path, mounts)
	}
	for _, p := range []string{"datasources", "dashboards"} {
		if !hasTargetUnder(mounts, "/etc/grafana/provisioning/"+p) {
			t.Errorf("nothing mounted under /etc/grafana/provisioning/%s", p)
		}
	}
}

// TestMountedFilesExist: every file or folder the compose file mounts from
// the repository is there.
func TestMountedFilesExist(t *testing.T) {
	f, _ := loadCompose(t)
	n := 0
	for name, s := range f.Services {
		for target, src := range mountTargets(s) {
			if !strings.HasPrefix(src, "./") {
				if _, ok := f.Volumes[src]; !ok {
					t.Errorf("%s mounts volume %q at %s, which volumes: does not declare", name, src, target)
				}
				continue
			}
			n++
			if _, err := os.Stat(filepath.Join(root, src)); err != nil {
				t.Errorf("%s mounts %s: %v", name, src, err)
			}
		}
	}
	if n < 6 {
		t.Errorf("only %d files mounted from the repository", n)
	}
}

// mountTargets maps the targets of s's volumes to their sources.
func mountTargets(s service) map[string]string {
	out := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out[parts[1]] = parts[0]
		}
	}
	return out
}

func hasTargetUnder(mounts map[string]string, dir string) bool {
	for target := range mounts {
		if strings.HasPrefix(target, dir+"/") {
			return true
		}
	}
	return false
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestREADMEShowsTheHeader: README's docker compose block is the header's
// commands, which the other tests run, word for word.
func TestREADMEShowsTheHeader(t *testing.T) {
	_, text := loadCompose(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### With docker compose")
	if !ok {
		t.Fatal("README.md has no section \"With docker compose\"")
	}
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if got, want := strings.TrimSpace(block), strings.Join(header(t, text), "\n"); got != want {
		t.Errorf("README's commands:\n%s\nthe header's:\n%s", got, want)
	}
}
