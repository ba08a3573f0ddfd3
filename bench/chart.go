package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// shortLabels name the rows in the chart and the targets.
var shortLabels = map[string]string{
	"a":              "(a) JetStream work queue, fsync lazy",
	"a-sync":         "(a) JetStream work queue, fsync always",
	"b":              "(b) hand-rolled KV loop, fsync lazy",
	"b-sync":         "(b) hand-rolled KV loop, fsync always",
	"raw-kv-lazy":    "raw KV Create+Update, fsync lazy",
	"raw-kv-sync":    "raw KV Create+Update, fsync always",
	"raw-kv-sync-gu": "raw KV cycle, fsync always, Updates group-committed",
	"raw-kv-sync-g":  "raw KV cycle, fsync always, all writes group-committed",
	"raw-pg":         "raw PostgreSQL INSERT…ON CONFLICT+UPDATE",
	"raw-pg-notify":  "raw PostgreSQL cycle, with pg_notify",
	"raw-redis":      "raw Redis SET NX+SET XX",
	"mem":            "(c) toolexec, memory store",
	"mem-sync":       "(c) toolexec, memory store, fsync always",
	"kv-sync":        "(c) toolexec, JetStream KV, fsync always",
	"kv-lazy":        "(c) toolexec, JetStream KV, fsync lazy",
	"kv-lazy-c1":     "(c) toolexec, JetStream KV, lazy, 1 in flight",
	"pg":             "(c) toolexec, PostgreSQL store",
	"redis":          "(c) toolexec, Redis store",
	"river":          "(d) River unique jobs, 64 in flight",
	"river-open":     "(d) River unique jobs, inserted without waiting",
	"temporal":       "(d) Temporal workflows, one activity, 64 in flight",
	"scale-1":        "toolexec, 1 executor process",
	"scale-2":        "toolexec, 2 executor processes",
	"scale-4":        "toolexec, 4 executor processes",
	"rss":            "toolexec executor process, memory",
}

func label(r Result) string {
	if l, ok := shortLabels[r.ID]; ok {
		return l
	}
	return r.Name
}

// groupColours colour the bars by part of the comparison.
var groupColours = map[string]string{
	groupCeiling:  "#8c8c8c",
	groupBaseline: "#4e79a7",
	groupRawStore: "#9ecae9",
	groupToolexec: "#e15759",
	groupPeer:     "#59a14f",
}

// logAxis maps values onto [0, width] on a log scale spanning whole decades.
type logAxis struct {
	lo, hi float64 // powers of ten
	width  float64
}

func newLogAxis(values []float64, width float64) logAxis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	a := logAxis{lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi))), width: width}
	if a.hi <= a.lo {
		a.hi = a.lo * 10
	}
	return a
}

func (a logAxis) x(v float64) float64 {
	if v <= a.lo {
		return 0
	}
	f := (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	return math.Min(f, 1) * a.width
}

// ticks are the decades of the axis.
func (a logAxis) ticks() []float64 {
	var t []float64
	for v := a.lo; v <= a.hi*1.0001; v *= 10 {
		t = append(t, v)
	}
	return t
}

// renderChart draws throughput and p99 latency of every measured row as two
// panels of horizontal bars on log scales, in SVG.
func renderChart(results []Result) string {
	var rows []Result
	for _, r := range results {
		if inComparison(r) && r.Err == "" && r.PerSec > 0 {
			rows = append(rows, r)
		}
	}
	const (
		labelW, panelW, gap = 330.0, 270.0, 40.0
		top, rowH, barH     = 70.0, 24.0, 15.0
	)
	var rates, p99s []float64
	for _, r := range rows {
		rates = append(rates, r.PerSec)
		p99s = append(p99s, r.P99)
	}
	ra, la := newLogAxis(rates, panelW), newLogAxis(p99s, panelW)
	x1 := labelW
	x2 := labelW + panelW + gap
	width := x2 + panelW + 80
	height := top + rowH*float64(len(rows)) + 70

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">toolexec against the JetStream ceiling, a hand-rolled loop, raw store cycles and River</text>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="52" font-weight="bold">calls (messages, cycles, jobs) per second, log scale</text>`+"\n", x1)
	fmt.Fprintf(&b, `<text x="%.0f" y="52" font-weight="bold">p99 latency, ms, log scale</text>`+"\n", x2)

	axis := func(x0 float64, a logAxis, unit string) {
		for _, t := range a.ticks() {
			x := x0 + a.x(t)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x, top-6, x, top+rowH*float64(len(rows)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s%s</text>`+"\n", x, top+rowH*float64(len(rows))+16, compact(t), unit)
		}
	}
	axis(x1, ra, "")
	axis(x2, la, "")

	for i, r := range rows {
		y := top + rowH*float64(i)
		colour := groupColours[r.Group]
		if colour == "" {
			colour = "#999"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", labelW-8, y+barH-3, html.EscapeString(label(r)))
		w := math.Max(ra.x(r.PerSec), 1)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", x1, y, w, barH, colour)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#222">%s</text>`+"\n", x1+w+4, y+barH-3, compact(r.PerSec))
		if r.P99 > 0 {
			w := math.Max(la.x(r.P99), 1)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s" opacity="0.8"/>`+"\n", x2, y, w, barH, colour)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#222">%s</text>`+"\n", x2+w+4, y+barH-3, trimFloat(r.P99))
		} else {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#888">open loop: not measured</text>`+"\n", x2+4, y+barH-3)
		}
	}
	// Legend.
	ly := height - 22
	lx := 10.0
	for _, g := range []string{groupCeiling, groupBaseline, groupRawStore, groupToolexec, groupPeer} {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/>`+"\n", lx, ly-10, groupColours[g])
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", lx+16, ly, html.EscapeString(g))
		lx += 26 + 7.2*float64(len(g))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// compact prints a number with a k suffix for thousands.
func compact(v float64) string {
	switch {
	case v >= 1e6:
		return trimFloat(v/1e6) + "M"
	case v >= 1e3:
		return trimFloat(v/1e3) + "k"
	default:
		return trimFloat(v)
	}
}

// trimFloat prints v with three significant digits, without trailing zeros.
func trimFloat(v float64) string {
	var s string
	switch {
	case v >= 100:
		s = fmt.Sprintf("%.0f", v)
	case v >= 10:
		s = fmt.Sprintf("%.1f", v)
	case v >= 1:
		s = fmt.Sprintf("%.2f", v)
	default:
		s = fmt.Sprintf("%.3f", v)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
