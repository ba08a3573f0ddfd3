package opskit_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type gridPos struct{ X, Y, W, H int }

type dashPanel struct {
	ID         int     `json:"id"`
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	GridPos    gridPos `json:"gridPos"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// TestDashboardShape: the dashboard imports into any Grafana with a
// Prometheus data source (chosen by a variable, never a fixed uid), its panels
// have unique ids, lie inside the 24-column grid without overlapping, and
// cover what an operator watches: answers by kind, latency, claims and waits,
// store errors, keys awaiting decision and the consumer's lag. (Whether each
// metric exists is cmd/executor's TestOpsKitQueriesExportedMetrics.)
func TestDashboardShape(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "toolexec.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string      `json:"uid"`
		Title      string      `json:"title"`
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("uid %q, title %q: want both", dash.UID, dash.Title)
	}
	var dsVar bool
	for _, v := range dash.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = true
		}
	}
	if !dsVar {
		t.Error("no datasource variable of type prometheus")
	}
	ids := map[int]string{}
	cells := map[[2]int]string{}
	var all strings.Builder
	for _, p := range dash.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q lies outside the grid: %+v", p.Title, g)
		}
	grid:
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, taken := cells[[2]int{x, y}]; taken {
					t.Errorf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
					break grid
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if refs[tg.RefID] || tg.RefID == "" {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			fmt.Fprintln(&all, tg.Expr)
		}
	}
	for topic, metric := range map[string]string{
		"answers by kind":         "sum by (kind) (rate(toolexec_calls_total",
		"latency":                 "toolexec_call_duration_seconds_bucket",
		"claims":                  `operation="claim"`,
		"waits":                   "toolexec_holder_wait_seconds",
		"store errors":            "toolexec_store_errors_total",
		"keys awaiting decision":  "max by (tenant) (toolexec_keys_awaiting_decision",
		"consumer lag":            "max(toolexec_consumer_pending_messages",
		"readiness":               "toolexec_ready",
		"builds":                  "toolexec_build_info",
		"indeterminate by reason": "toolexec_indeterminate_total",
	} {
		if !strings.Contains(all.String(), metric) {
			t.Errorf("no panel shows %s (%s)", topic, metric)
		}
	}
	// Shared state is aggregated with max, never summed over executors.
	for _, shared := range []string{"toolexec_keys_awaiting_decision", "toolexec_consumer_pending_messages"} {
		if strings.Contains(all.String(), "sum("+shared) {
			t.Errorf("%s is summed over executors; every executor reports the same number", shared)
		}
	}
}
