package main

import (
	"strings"
	"testing"
)

func TestDecodeTemporalRow(t *testing.T) {
	out := []byte(`{"id":"temporal","name":"Temporal v1.32.1 embedded","durability":"SQLite file, WAL","ops":2000,"concurrency":64,"duplicates":0.2,"seconds":20,"per_sec":100,"p50_ms":600,"p99_ms":1100,"max_ms":1400,"check":"2000 of 2000 calls answered","check_ok":true,"cpu_us_per_op":12000}` + "\n")
	r := decodeTemporalRow(Result{ID: "temporal", Group: groupPeer}, out)
	if r.Group != groupPeer || r.PerSec != 100 || r.P99 != 1100 || r.CPUPerOp != 12000 || !r.CheckOK || r.Durability != "SQLite file, WAL" || r.Err != "" {
		t.Errorf("decoded %+v", r)
	}
	bad := decodeTemporalRow(Result{ID: "temporal", Group: groupPeer}, []byte("panic: boom"))
	if bad.Err == "" || !strings.Contains(bad.Err, "reading the Temporal program's row") || bad.Group != groupPeer {
		t.Errorf("garbage decoded as %+v", bad)
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\nb\nc\nd\n", 2); got != "c\nd" {
		t.Errorf("lastLines = %q", got)
	}
	if got := lastLines("only", 5); got != "only" {
		t.Errorf("lastLines of one line = %q", got)
	}
}
