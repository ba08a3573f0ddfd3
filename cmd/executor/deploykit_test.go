package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/tesserix/toolexec/internal/testkit/promnames"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// The operations kit's files, from this package's directory.
var (
	dashboardFile = filepath.Join("..", "..", "deploy", "grafana", "toolexec.json")
	alertsFile    = filepath.Join("..", "..", "deploy", "prometheus", "alerts.yml")
)

// prometheusOwn are the series Prometheus writes itself, which queries may use.
var prometheusOwn = []string{"up"}

// recordingRegistry is a registry that remembers every collector registered.
type recordingRegistry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

func (r *recordingRegistry) Register(c prometheus.Collector) error {
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
	return r.Registry.Register(c)
}

func (r *recordingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// seriesNames returns every series name the registered collectors can
// export: each family's name, and for a histogram its _bucket, _sum and
// _count series instead (a summary: its name, _sum and _count). Names come
// from the collectors' descriptions, so families without a series yet count
// too; types from what the registry gathers, or from the collector's Go type.
func (r *recordingRegistry) seriesNames(t *testing.T) map[string]bool {
	t.Helper()
	types := map[string]dto.MetricType{}
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for _, c := range r.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			name := m[1]
			typ, gathered := types[name]
			if !gathered {
				switch c.(type) {
				case *prometheus.HistogramVec, prometheus.Histogram:
					typ = dto.MetricType_HISTOGRAM
				case *prometheus.SummaryVec, prometheus.Summary:
					typ = dto.MetricType_SUMMARY
				default:
					typ = dto.MetricType_UNTYPED
				}
			}
			switch typ {
			case dto.MetricType_HISTOGRAM:
				out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
			case dto.MetricType_SUMMARY:
				out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
			default:
				out[name] = true
			}
		}
	}
	return out
}

// exportedSeries runs the executor with args (calls of every outcome made
// through it) and returns what its registry can export.
func exportedSeries(t *testing.T, args ...string) map[string]bool {
	t.Helper()
	rec := &recordingRegistry{Registry: prometheus.NewRegistry()}
	old := newRegistry
	newRegistry = func() metricsRegistry { return rec }
	defer func() { newRegistry = old }()
	addr := testenv.FreeAddr(t)
	url, stop := startExecutor(t, append([]string{"--demo", "--metrics-addr", addr, "--awaiting-interval", "50ms"}, args...)...)
	sentinelCalls(t, url)
	time.Sleep(100 * time.Millisecond) // a count of the keys awaiting decision
	names := rec.seriesNames(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return names
}

// dropSchema drops the PostgreSQL schema when the test ends.
func dropSchema(t *testing.T, url, schema string) {
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
}

// queries are the PromQL expressions of one file, by where they stand.
type queries map[string]string

// dashboardQueries returns every PromQL expression of a Grafana dashboard: the
// panels' targets and the query variables (label_values(selector, label)).
func dashboardQueries(t *testing.T, data []byte) queries {
	t.Helper()
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	out := queries{}
	labelValues := regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				path += "/" + title
			}
			if name, ok := v["name"].(string); ok {
				path += "/$" + name
			}
			for k, x := range v {
				s, isString := x.(string)
				switch {
				case k == "expr" && isString:
					out[fmt.Sprintf("%s[%v]", path, v["refId"])] = s
				case (k == "query" || k == "definition") && isString && strings.HasPrefix(strings.TrimSpace(s), "label_values("):
					m := labelValues.FindStringSubmatch(s)
					if m == nil {
						t.Errorf("%s: a variable query that is not label_values(selector, label): %s", path, s)
						continue
					}
					out[path+" "+k] = m[1]
				default:
					walk(path, x)
				}
			}
		case []any:
			for _, x := range v {
				walk(path, x)
			}
		}
	}
	walk("", dash)
	return out
}

// ruleQueries returns every expression of a Prometheus rules file.
func ruleQueries(t *testing.T, data []byte) queries {
	t.Helper()
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("the rules are not YAML: %v", err)
	}
	out := queries{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out[g.Name+"/"+r.Alert+r.Record] = r.Expr
		}
	}
	return out
}

// unknownMetrics returns, for each query, the metric names it selects that
// are not in exported, and the queries that select none at all or cannot be
// read.
func unknownMetrics(qs queries, exported map[string]bool) []string {
	var problems []string
	for where, expr := range qs {
		names, err := promnames.Names(expr)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", where, err))
		case len(names) == 0:
			problems = append(problems, fmt.Sprintf("%s: queries no metric: %s", where, expr))
		}
		for _, n := range names {
			if !exported[n] && !slices.Contains(prometheusOwn, n) {
				problems = append(problems, fmt.Sprintf("%s: %s is not a metric the executor exports", where, n))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// TestOpsKitQueriesExportedMetrics: every metric the Grafana dashboard and the
// alert rules query is one the executor exports — on the default store, or
// on PostgreSQL (whose group commits add three series).
func TestOpsKitQueriesExportedMetrics(t *testing.T) {
	exported := exportedSeries(t)
	pgURL := testenv.PostgresURL(t)
	schema := fmt.Sprintf("toolexec_kit_%d", time.Now().UnixNano())
	dropSchema(t, pgURL, schema)
	for n := range exportedSeries(t, "--store", "postgres", "--postgres-url", pgURL, "--postgres-schema", schema, "--ensure-schema") {
		exported[n] = true
	}
	for _, want := range []string{
		"toolexec_calls_total", "toolexec_call_duration_seconds_bucket", "toolexec_holder_wait_seconds_count",
		"toolexec_store_errors_total", "toolexec_keys_awaiting_decision", "toolexec_consumer_pending_messages",
		"toolexec_build_info", "toolexec_ready", "toolexec_store_group_commits_total",
	} {
		if !exported[want] {
			t.Errorf("the executor's registry lacks %s", want)
		}
	}
	if exported["toolexec_call_duration_seconds"] {
		t.Error("a histogram's bare name counts as a series")
	}

	for _, f := range []struct {
		path  string
		parse func(*testing.T, []byte) queries
	}{{dashboardFile, dashboardQueries}, {alertsFile, ruleQueries}} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		qs := f.parse(t, data)
		if len(qs) < 5 {
			t.Errorf("%s: only %d queries found", f.path, len(qs))
		}
		for _, p := range unknownMetrics(qs, exported) {
			t.Errorf("%s: %s", f.path, p)
		}
	}

	// The check itself: a panel or a rule naming a metric nobody exports,
	// or a histogram without its suffix, is caught.
	bad := queries{
		"made up":      `sum(rate(toolexec_calls_made_up_total[5m]))`,
		"bare":         `histogram_quantile(0.9, rate(toolexec_call_duration_seconds[5m]))`,
		"label_values": `toolexec_nothing{job="x"}`,
	}
	if got := unknownMetrics(bad, exported); len(got) != 3 {
		t.Errorf("unknown metrics caught: %q, want all three", got)
	}
	dash := []byte(`{"panels":[{"title":"p","targets":[{"refId":"A","expr":"rate(toolexec_nope_total[5m])"}]}],
		"templating":{"list":[{"name":"v","query":"label_values(toolexec_nope_either, tool)"}]}}`)
	if got := unknownMetrics(dashboardQueries(t, dash), exported); len(got) != 2 {
		t.Errorf("a dashboard querying two unknown metrics: %q, want both caught", got)
	}
}
