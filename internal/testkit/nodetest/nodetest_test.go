package nodetest_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/nodetest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

func TestPackagesArePinned(t *testing.T) {
	for _, name := range []string{nodetest.SDKPackage, nodetest.ConformancePackage, nodetest.MemoryPackage, nodetest.NodePackage} {
		dir := nodetest.Package(t, name)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("Package(%s) = %s: %v", name, dir, err)
		}
	}
}

func TestNewerNodeRuns(t *testing.T) {
	out, err := exec.Command(nodetest.NewerNode(t), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "v26.") {
		t.Errorf("newer node is %s, want v26", got)
	}
}

// TestScenariosMatchSuite keeps the table in step with the pinned suite: a
// new version that adds, drops or renames a scenario fails here until the
// table says whether it applies.
func TestScenariosMatchSuite(t *testing.T) {
	suite := nodetest.Conformance(t)
	got, err := suite.List(testenv.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range nodetest.Scenarios {
		want = append(want, s.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the suite lists\n%q\nthe table has\n%q", got, want)
	}
}

func TestScenarioTable(t *testing.T) {
	want := []string{
		"server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-error",
		"tools-call-with-progress", "json-schema-2020-12", "server-sse-multiple-streams", "dns-rebinding-protection",
	}
	if got := nodetest.ToolsOnly(); !reflect.DeepEqual(got, want) {
		t.Errorf("ToolsOnly() = %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, s := range nodetest.Scenarios {
		if s.Reason == "" {
			t.Errorf("%s has no reason", s.Name)
		}
		if seen[s.Name] {
			t.Errorf("%s is listed twice", s.Name)
		}
		seen[s.Name] = true
		// The gateway may leave out only what it does not advertise.
		advertised := !strings.HasPrefix(s.Name, "resources-") && !strings.HasPrefix(s.Name, "prompts-") && s.Name != "completion-complete"
		if (s.Exception == "") != advertised {
			t.Errorf("%s: exception %q; only resources, prompts and completion scenarios are exceptions, each with its reason", s.Name, s.Exception)
		}
		if s.Exception != "" && s.Owed != "" {
			t.Errorf("%s is both an exception and owed", s.Name)
		}
		if s.Applies && s.Owed != "" {
			t.Errorf("%s applies to a tools-only server, yet the gateway owes it", s.Name)
		}
	}
	if n := len(nodetest.Gateway()); n != len(nodetest.Scenarios)-12 {
		t.Errorf("Gateway() has %d scenarios, want all but the 12 of resources, prompts and completion", n)
	}
}

func TestJudge(t *testing.T) {
	check := func(statuses ...string) nodetest.ScenarioResult {
		var r nodetest.ScenarioResult
		for _, s := range statuses {
			r.Checks = append(r.Checks, nodetest.Check{Status: s})
		}
		return r
	}
	ok, warned, failed := check("SUCCESS", "INFO"), check("SUCCESS", "WARNING"), check("SUCCESS", "FAILURE")
	for _, tc := range []struct {
		name string
		give nodetest.Scenario
		r    nodetest.ScenarioResult
		want nodetest.Verdict
	}{
		{"passes", nodetest.Scenario{}, ok, nodetest.Pass},
		{"warnings pass", nodetest.Scenario{}, warned, nodetest.Pass},
		{"fails", nodetest.Scenario{}, failed, nodetest.Fail},
		{"nothing succeeded", nodetest.Scenario{}, check("INFO"), nodetest.Fail},
		{"strict warnings fail", nodetest.Scenario{Strict: true}, warned, nodetest.Fail},
		{"strict passes", nodetest.Scenario{Strict: true}, ok, nodetest.Pass},
		{"owed fails", nodetest.Scenario{Owed: "later"}, failed, nodetest.Owed},
		{"owed passes", nodetest.Scenario{Owed: "later"}, ok, nodetest.Flip},
	} {
		if got := nodetest.Judge(tc.give, tc.r); got != tc.want {
			t.Errorf("%s: Judge = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRunRejectsUnknownScenario(t *testing.T) {
	suite := nodetest.Conformance(t)
	_, err := suite.Run(testenv.Context(t, time.Minute), "http://127.0.0.1:1/mcp", "no-such-scenario")
	if !errors.Is(err, nodetest.ErrUnknownScenario) {
		t.Errorf("Run = %v, want ErrUnknownScenario", err)
	}
}

func TestEntities(t *testing.T) {
	dir := t.TempDir()
	m := &nodetest.MemoryServer{File: filepath.Join(dir, "memory.jsonl")}
	if got, err := m.Entities(); err != nil || got != nil {
		t.Fatalf("Entities of a missing file = %v, %v; want none", got, err)
	}
	lines := `{"type":"entity","name":"a","entityType":"t","observations":["x"]}
{"type":"relation","from":"a","to":"b","relationType":"knows"}

{"type":"entity","name":"b","entityType":"t","observations":[]}`
	if err := os.WriteFile(m.File, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := m.Entities()
	if err != nil {
		t.Fatal(err)
	}
	want := []nodetest.Entity{{Name: "a", EntityType: "t", Observations: []string{"x"}}, {Name: "b", EntityType: "t", Observations: []string{}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Entities = %+v, want %+v", got, want)
	}
	if err := os.WriteFile(m.File, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Entities(); err == nil {
		t.Error("Entities of a broken file: no error")
	}
}
