package opskit_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const helmFix = "make tools builds it (helm v4.3.2, into ~/.cache/toolexec/tools) and prints the line that puts it on PATH, as .ci/run does; or name it in TOOLEXEC_HELM"

var chart = filepath.Join(root, "deploy", "helm", "toolexec")

// manifest is one rendered Kubernetes object.
type manifest map[string]any

// get walks m along path: map keys, or [i] for list items.
func (m manifest) get(path ...any) any {
	var v any = map[string]any(m)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			mm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = mm[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// rendered is what helm template made of the chart.
type rendered struct {
	text    string
	objects []manifest
}

func (r rendered) kind(kind string) []manifest {
	var out []manifest
	for _, o := range r.objects {
		if o["kind"] == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the one object of kind, failing the test otherwise.
func (r rendered) one(t *testing.T, kind string) manifest {
	t.Helper()
	objs := r.kind(kind)
	if len(objs) != 1 {
		t.Fatalf("%d %s objects rendered, want 1", len(objs), kind)
	}
	return objs[0]
}

// template renders the chart with the values given as --set pairs (or, with
// the prefix "file:", --set-file pairs).
func template(t *testing.T, helm string, set ...string) (rendered, error) {
	t.Helper()
	args := []string{"template", "rel", chart, "--namespace", "ops"}
	for _, s := range set {
		if f, ok := strings.CutPrefix(s, "file:"); ok {
			args = append(args, "--set-file", f)
			continue
		}
		args = append(args, "--set", s)
	}
	out, errOut, err := run(t, ".", helm, args...)
	if err != nil {
		return rendered{}, fmt.Errorf("%w: %s", err, errOut)
	}
	r := rendered{text: out}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var m map[string]any // not manifest: yaml would make every nested map one
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template rendered invalid YAML: %v\n%s", err, out)
		}
		if m != nil {
			r.objects = append(r.objects, m)
		}
	}
	return r, nil
}

func mustTemplate(t *testing.T, helm string, set ...string) rendered {
	t.Helper()
	r, err := template(t, helm, set...)
	if err != nil {
		t.Fatalf("helm template %v: %v", set, err)
	}
	return r
}

// container returns the Deployment's executor container.
func container(t *testing.T, r rendered) manifest {
	t.Helper()
	c, ok := r.one(t, "Deployment").get("spec", "template", "spec", "containers", 0).(map[string]any)
	if !ok {
		t.Fatal("the Deployment has no container")
	}
	return c
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// flag returns the value of --name=value among args, and whether it is there.
func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if a == "--"+name {
			return "", true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestHelmLint: helm lint --strict accepts the chart with the values of each
// shape of deployment.
func TestHelmLint(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	out, _, err := run(t, ".", helm, "version", "--short")
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "v4.") {
		t.Fatalf("helm version %q (%v): want v4", out, err)
	}
	for _, set := range [][]string{
		{"nats.url=nats://nats:4222", "tools.demo=true"},
		{"nats.existingSecret=nats", "store.kind=postgres", "store.existingSecret=pg", "tools.file=tools: []", "metrics.serviceMonitor.enabled=true"},
		{"nats.url=nats://nats:4222", "store.kind=redis", "store.url=redis://redis:6379/0", "tools.demo=true", "console.enabled=true", "console.existingSecret=console", "mcp.enabled=true", "mcp.tokensSecret=mcp"},
	} {
		args := []string{"lint", "--strict", chart}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, errOut, err := run(t, ".", helm, args...); err != nil {
			t.Errorf("helm lint %v: %v\n%s%s", set, err, out, errOut)
		}
	}
}

// TestHelmExecutorFlags: every flag the chart passes is one the executor
// has, and the probes and ports agree with --metrics-addr.
func TestHelmExecutorFlags(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	help := executorHelp(t)
	r := mustTemplate(t, helm, "nats.url=nats://nats:4222", "tools.file=tools: []", "tools.demo=true",
		"store.kind=postgres", "store.url=postgres://db/x", "metrics.port=9100", "nats.creds=CREDS",
		"nats.adminAccount=ADMIN", "console.enabled=true", "console.existingSecret=console", "console.operatorsSecret=operators",
		"mcp.enabled=true", "mcp.tokensSecret=mcp", "mcp.allowedOrigins={https://a.example}", "extraArgs={--concurrency=8}")
	c := container(t, r)
	args := strs(c["args"])
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !regexp.MustCompile(`(?m)^\s+(-\w, )?--`+regexp.QuoteMeta(name)+`\b`).MatchString(help) {
			t.Errorf("the chart passes %s, which is not an executor flag", a)
		}
	}
	env := map[string]bool{}
	for _, e := range c["env"].([]any) {
		env[e.(map[string]any)["name"].(string)] = true
	}
	for name := range env {
		if regexp.MustCompile(`\$` + name + `\b`).MatchString(help) {
			continue // a variable a flag's help names, such as $NATS_URL
		}
		flagName := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "TOOLEXEC_")), "_", "-")
		if !strings.Contains(help, "--"+flagName+" ") {
			t.Errorf("the chart sets %s, which stands for no executor flag (--%s) and no variable a flag's help names", name, flagName)
		}
	}
	for _, want := range []string{"NATS_URL", "TOOLEXEC_POSTGRES_URL", "TOOLEXEC_CONSOLE_TOKEN"} {
		if !env[want] {
			t.Errorf("the container lacks %s", want)
		}
	}

	addr, _ := flag(args, "metrics-addr")
	if addr != "0.0.0.0:9100" {
		t.Errorf("--metrics-addr=%s, want 0.0.0.0:9100 (metrics.port)", addr)
	}
	ports := map[string]int{}
	for _, p := range c["ports"].([]any) {
		pm := p.(map[string]any)
		ports[pm["name"].(string)] = pm["containerPort"].(int)
	}
	if ports["metrics"] != 9100 {
		t.Errorf("the metrics port is %d, want 9100", ports["metrics"])
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		get := manifest(c).get(probe, "httpGet")
		g, _ := get.(map[string]any)
		if g["path"] != path || g["port"] != "metrics" {
			t.Errorf("%s: %v, want %s on the metrics port", probe, get, path)
		}
	}
	for flagName, port := range map[string]string{"console-addr": "console", "mcp-addr": "mcp"} {
		v, _ := flag(args, flagName)
		if want := fmt.Sprintf("0.0.0.0:%d", ports[port]); v != want || ports[port] == 0 {
			t.Errorf("--%s=%s, want %s (the %s port)", flagName, v, want, port)
		}
	}
	svcPorts := map[string]any{}
	for _, p := range r.one(t, "Service").get("spec", "ports").([]any) {
		pm := p.(map[string]any)
		svcPorts[pm["name"].(string)] = pm["targetPort"]
	}
	for _, name := range []string{"metrics", "console", "mcp"} {
		if svcPorts[name] != name {
			t.Errorf("the Service's %s port targets %v, want the container's %s port", name, svcPorts[name], name)
		}
	}

	// The files the flags name are where the volumes are mounted.
	mounts := map[string]string{}
	for _, m := range c["volumeMounts"].([]any) {
		mm := m.(map[string]any)
		mounts[mm["name"].(string)] = mm["mountPath"].(string)
	}
	vols := map[string]manifest{}
	for _, v := range r.one(t, "Deployment").get("spec", "template", "spec", "volumes").([]any) {
		vols[v.(map[string]any)["name"].(string)] = v.(map[string]any)
	}
	for _, f := range []struct{ flag, volume string }{
		{"creds", "nats-creds"}, {"tools-file", "tools"}, {"mcp-tokens-file", "mcp-tokens"},
		{"console-operators-file", "console-operators"},
	} {
		path, ok := flag(args, f.flag)
		item, _ := vols[f.volume].get("secret", "items", 0, "path").(string)
		if item == "" {
			item, _ = vols[f.volume].get("configMap", "items", 0, "path").(string)
		}
		if !ok || mounts[f.volume] == "" || path != mounts[f.volume]+"/"+item {
			t.Errorf("--%s=%s, but volume %s is mounted at %q with item %q", f.flag, path, f.volume, mounts[f.volume], item)
		}
	}
}

// TestHelmSecretsReferencedNotInlined: the NATS URL and credentials and the
// store's URL reach the executor through Secrets, never in the Deployment:
// from a Secret the chart creates, or from one named in the values, which the
// chart then does not create.
func TestHelmSecretsReferencedNotInlined(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	secrets := []string{"nats://secret-host:4222", "hunter2", "s3cr3t-token", "postgres://u:pgpass@db/toolexec", "-----CREDS-----"}
	r := mustTemplate(t, helm, "nats.url="+secrets[0], "nats.user=exec", "nats.password="+secrets[1], "nats.token="+secrets[2],
		"store.kind=postgres", "store.url="+secrets[3], "nats.creds="+secrets[4], "tools.demo=true")
	dep := r.one(t, "Deployment")
	depText, err := yaml.Marshal(dep)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(depText), s) {
			t.Errorf("the Deployment holds %q in clear", s)
		}
	}
	created := map[string]manifest{}
	for _, s := range r.kind("Secret") {
		created[s.get("metadata", "name").(string)] = s
	}
	if created["rel-toolexec-nats"].get("stringData", "password") != secrets[1] ||
		created["rel-toolexec-store"].get("stringData", "url") != secrets[3] {
		t.Errorf("the Secrets the chart creates lack the values: %v", created)
	}
	refs := secretRefs(container(t, r))
	for name := range refs {
		if created[name] == nil {
			t.Errorf("the container references Secret %s, which is not rendered", name)
		}
	}

	r = mustTemplate(t, helm, "nats.existingSecret=my-nats", "nats.credsFromSecret=true", "store.kind=redis", "store.existingSecret=my-redis", "tools.demo=true")
	if s := r.kind("Secret"); len(s) != 0 {
		t.Errorf("with existing Secrets named, the chart still creates %d", len(s))
	}
	refs = secretRefs(container(t, r))
	if !refs["my-nats"] || !refs["my-redis"] {
		t.Errorf("the container references %v, want my-nats and my-redis", refs)
	}
	if v, _ := r.one(t, "Deployment").get("spec", "template", "spec", "volumes", 1, "secret", "secretName").(string); v != "my-nats" {
		t.Errorf("the credentials file comes from %q, want my-nats", v)
	}
}

// secretRefs returns the Secrets a container's environment references.
func secretRefs(c manifest) map[string]bool {
	out := map[string]bool{}
	for _, e := range c["env"].([]any) {
		if name, ok := manifest(e.(map[string]any)).get("valueFrom", "secretKeyRef", "name").(string); ok {
			out[name] = true
		}
	}
	return out
}

// TestHelmServiceMonitor: a ServiceMonitor only when enabled, scraping
// /metrics on the Service's metrics port of these executors.
func TestHelmServiceMonitor(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	base := []string{"nats.url=nats://nats:4222", "tools.demo=true"}
	if sm := mustTemplate(t, helm, base...).kind("ServiceMonitor"); len(sm) != 0 {
		t.Errorf("%d ServiceMonitors by default, want none", len(sm))
	}
	r := mustTemplate(t, helm, append(base, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom")...)
	sm := r.one(t, "ServiceMonitor")
	if sm.get("spec", "endpoints", 0, "port") != "metrics" || sm.get("spec", "endpoints", 0, "path") != "/metrics" {
		t.Errorf("ServiceMonitor endpoint %v, want /metrics on the metrics port", sm.get("spec", "endpoints"))
	}
	if sm.get("metadata", "labels", "release") != "prom" {
		t.Error("the ServiceMonitor lacks the labels asked for")
	}
	svcLabels, _ := r.one(t, "Service").get("metadata", "labels").(map[string]any)
	sel, _ := sm.get("spec", "selector", "matchLabels").(map[string]any)
	for k, v := range sel {
		if svcLabels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%v, which the Service lacks", k, v)
		}
	}
}

// TestHelmHardened: the executor runs as a non-root user on a read-only root
// file system, with no privilege escalation, no capabilities and no
// service-account token; a PodDisruptionBudget keeps one executor down at most.
func TestHelmHardened(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	r := mustTemplate(t, helm, "nats.url=nats://nats:4222", "tools.demo=true")
	dep := r.one(t, "Deployment")
	c := container(t, r)
	for _, check := range []struct {
		what string
		got  any
		want any
	}{
		{"runAsNonRoot", dep.get("spec", "template", "spec", "securityContext", "runAsNonRoot"), true},
		{"readOnlyRootFilesystem", manifest(c).get("securityContext", "readOnlyRootFilesystem"), true},
		{"allowPrivilegeEscalation", manifest(c).get("securityContext", "allowPrivilegeEscalation"), false},
		{"capabilities dropped", fmt.Sprint(manifest(c).get("securityContext", "capabilities", "drop")), "[ALL]"},
		{"automountServiceAccountToken", dep.get("spec", "template", "spec", "automountServiceAccountToken"), false},
		{"replicas", dep.get("spec", "replicas"), 2},
		{"grace period", dep.get("spec", "template", "spec", "terminationGracePeriodSeconds"), 45},
		{"PDB", r.one(t, "PodDisruptionBudget").get("spec", "maxUnavailable"), 1},
	} {
		if check.got != check.want {
			t.Errorf("%s: %v, want %v", check.what, check.got, check.want)
		}
	}
	if v, _ := flag(strs(c["args"]), "drain-timeout"); v != "30s" {
		t.Errorf("--drain-timeout=%s, want 30s (15 s less than the grace period)", v)
	}
	if pdb := mustTemplate(t, helm, "nats.url=nats://nats:4222", "tools.demo=true", "replicaCount=1").kind("PodDisruptionBudget"); len(pdb) != 0 {
		t.Error("a PodDisruptionBudget for a single executor would block every drain")
	}
}

// TestHelmRefusesBadValues: values that cannot work fail at template time,
// naming the fix.
func TestHelmRefusesBadValues(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"tools.demo=true"}, "nats.url"},
		{[]string{"nats.url=nats://n:4222"}, "no tools"},
		{[]string{"nats.url=nats://n:4222", "tools.demo=true", "store.kind=memory"}, "not shared"},
		{[]string{"nats.url=nats://n:4222", "tools.demo=true", "store.kind=postgres"}, "store.url"},
		{[]string{"nats.url=nats://n:4222", "tools.demo=true", "console.enabled=true"}, "console.operatorsSecret"},
		{[]string{"nats.url=nats://n:4222", "tools.demo=true", "mcp.enabled=true"}, "mcp.tokensSecret"},
	} {
		_, err := template(t, helm, c.set...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm template %v: %v, want an error naming %s", c.set, err, c.want)
		}
	}
	// Each of those is fixed by what its message names.
	r := mustTemplate(t, helm, "nats.url=nats://n:4222", "tools.demo=true", "store.kind=postgres", "store.url=postgres://db/x")
	if args := strs(container(t, r)["args"]); !slices.Contains(args, "--ensure-schema") || !slices.Contains(args, "--store=postgres") {
		t.Errorf("postgres store: args %v, want --store=postgres and --ensure-schema", args)
	}
}

// TestHelmToolsFile: a tools file given to the chart reaches the executor as
// written, through a ConfigMap mounted where --tools-file points; an existing
// ConfigMap is used instead of one of the chart's.
func TestHelmToolsFile(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	file := filepath.Join(root, "examples", "tools.yaml")
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r := mustTemplate(t, helm, "nats.url=nats://n:4222", "file:tools.file="+file)
	got, _ := r.one(t, "ConfigMap").get("data", "tools.yaml").(string)
	if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
		t.Errorf("the ConfigMap's tools.yaml differs from %s:\n%s", file, got)
	}
	if args := strs(container(t, r)["args"]); slices.Contains(args, "--demo") {
		t.Error("--demo without tools.demo")
	}
	r = mustTemplate(t, helm, "nats.url=nats://n:4222", "tools.existingConfigMap=my-tools")
	if n := len(r.kind("ConfigMap")); n != 0 {
		t.Errorf("with an existing ConfigMap, the chart makes %d", n)
	}
	if v := r.one(t, "Deployment").get("spec", "template", "spec", "volumes", 1, "configMap", "name"); v != "my-tools" {
		t.Errorf("the tools volume is ConfigMap %v, want my-tools", v)
	}
}

// TestHelmConsoleOperators: with only an operators Secret the console signs
// operators in by their own tokens (its file mounted, no shared token set);
// with only the shared token, no operators file is passed.
func TestHelmConsoleOperators(t *testing.T) {
	helm := tool(t, "helm", "TOOLEXEC_HELM", helmFix)
	base := []string{"nats.url=nats://n:4222", "tools.demo=true", "console.enabled=true"}
	c := container(t, mustTemplate(t, helm, append(base, "console.operatorsSecret=operators")...))
	if path, ok := flag(strs(c["args"]), "console-operators-file"); !ok || path != "/etc/toolexec/console/operators" {
		t.Errorf("operators Secret only: --console-operators-file = %q (%v)", path, ok)
	}
	if refs := secretRefs(c); refs["console"] {
		t.Errorf("operators Secret only: the container still reads a shared token: %v", refs)
	}
	for _, e := range c["env"].([]any) {
		if e.(map[string]any)["name"] == "TOOLEXEC_CONSOLE_TOKEN" {
			t.Error("operators Secret only: TOOLEXEC_CONSOLE_TOKEN is set")
		}
	}
	c = container(t, mustTemplate(t, helm, append(base, "console.existingSecret=console")...))
	if _, ok := flag(strs(c["args"]), "console-operators-file"); ok {
		t.Error("shared token only: --console-operators-file is passed")
	}
}
