package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// clusterRows are the production-shape rows in the order their table shows
// them, each with the single-node row it repeats on the cluster and, for
// toolexec's rows, the hand-rolled loop of the same fsync.
var clusterRows = []struct{ id, single, loop string }{
	{clusterLoopLazy, "b", ""},
	{clusterKVLazy, "kv-lazy", clusterLoopLazy},
	{clusterLoopSync, "b-sync", ""},
	{clusterKVSync, "kv-sync", clusterLoopSync},
}

// renderCluster writes the production-shape section, when the run has its
// rows: the cluster's table, then the failover pause.
func renderCluster(b *strings.Builder, in reportInput) {
	var rows []Result
	for _, cr := range clusterRows {
		if r, ok := findRow(in.results, cr.id); ok {
			rows = append(rows, r)
		}
	}
	var failovers []Result
	for _, id := range []string{clusterFailover, clusterCrash} {
		if r, ok := findRow(in.results, id); ok {
			failovers = append(failovers, r)
		}
	}
	if len(rows) == 0 && len(failovers) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	c := in.cfg
	w("## Production shape: three-node cluster\n\n")
	w("No target yet: what the shape a deployment should use costs, measured. Three nats-server\n")
	w("nodes run embedded in the benchmark's process, on loopback ports of its range, routed to\n")
	w("each other, JetStream on each with a store directory of its own; a new cluster for each\n")
	w("row. The streams and the KV bucket (toolexec's, and the hand-rolled loop's) have %d\n", clusterNodes)
	w("replicas, so every write is stored by a quorum of two nodes before it is acknowledged. The\n")
	w("clients, the executor and emitter bench are given all three URLs. Same calls as the\n")
	w("single-node rows: %d (%d with fsync always), %d %% duplicate keys, %d in flight, after %d\n",
		c.calls, c.syncCalls, int(c.duplicates*100+0.5), c.concurrency, c.warmup)
	w("warm-up calls. The three nodes share this machine's %d CPUs with everything else, and *CPU\n", in.machine.CPUs)
	w("µs/op* counts all three (they run in the harness process). *× one node* compares with the\n")
	w("same row on a single node in this run, *× loop* toolexec's KV store with the hand-rolled\n")
	w("loop of the same fsync on the cluster.\n\n")
	if len(rows) > 0 {
		renderClusterTable(b, in.results, rows)
	}
	for _, r := range failovers {
		renderFailover(b, in, r)
	}
}

// renderClusterTable writes the table of the cluster's rows.
func renderClusterTable(b *strings.Builder, all, rows []Result) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("| configuration | durability | ops/s | p50 ms | p99 ms | CPU µs/op | × one node | × loop | load | check |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		if r.Err != "" {
			w("| %s | %s | — | — | — | — | — | — | %s | not measured: %s |\n", label(r), r.Durability, r.Load, escapeCell(r.Err))
			continue
		}
		single, loop := "—", "—"
		for _, cr := range clusterRows {
			if cr.id != r.ID {
				continue
			}
			if s, ok := find(all, cr.single); ok {
				single = fmt.Sprintf("%.2f", r.PerSec/s.PerSec)
			}
			if l, ok := find(all, cr.loop); ok && cr.loop != "" {
				loop = fmt.Sprintf("%.2f", r.PerSec/l.PerSec)
			}
		}
		w("| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s: %s |\n", label(r), r.Durability, r.PerSec, trimFloat(r.P50), trimFloat(r.P99),
			cpuCell(r), single, loop, r.Load, checkWord(r), escapeCell(r.Check))
	}
	w("\n")
}

// renderFailover writes a failover pause: what was done, the figures and
// every kill. The stops of the cluster-failover row come first; the crashes
// of cluster-failover-crash refer to them.
func renderFailover(b *strings.Builder, in reportInput, r Result) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if r.ID == clusterCrash {
		w("### Failover pause after a crash\n\n")
		w("The same load and the same %d kills of the KV stream's leader, on a new cluster whose\n", failoverKills)
		w("routes run through a TCP proxy for each ordered pair of nodes (each node advertises an\n")
		w("address that refuses connections, so gossip cannot bypass the proxies). Each kill first\n")
		w("resets every route to and from the node and refuses new ones, then stops it with\n")
		w("Shutdown: its leaderships cannot be handed over, and its peers see every route drop at\n")
		w("once and must wait out their election timeout (nats-server's is 4 to 9 s) before one of\n")
		w("them leads, as after kill -9 of its process. Its clients see their connection close and\n")
		w("reconnect to the others. Its store directory is kept whole, as a process crash leaves\n")
		w("it (a machine's power loss could lose what lazy fsync had not written). Before the node\n")
		w("is started again, the proxies forward once more.\n\n")
	} else {
		w("### Failover pause\n\n")
		w("toolexec with the JetStream KV store on a new cluster (lazy fsync) serves a steady closed\n")
		w("loop: %d callers in this process, each calling book with toolexec.Client (connected with\n", in.cfg.concurrency)
		w("all three URLs) and waiting for the answer before the next call, %d %% of the calls\n", int(in.cfg.duplicates*100+0.5))
		w("repeating an earlier call's key, each waiting at most %s for its answer. After %s of\n", shortDuration(failoverCallTimeout), shortDuration(failoverSteady))
		w("steady load, the node that leads the bucket's stream (%s, its leader as the stream\n", kvStream)
		w("info's cluster section names it) is stopped with nats-server's Shutdown; once the pause is\n")
		w("measured, the node is started again on its ports with its store directory, the run waits\n")
		w("until every node passes its health check (it has caught up), and the next kill follows the\n")
		w("next %s of steady load: %d kills.\n\n", shortDuration(failoverSteady), failoverKills)
		w("**The pause** is the time from the kill to the first answer to a call made after it: the\n")
		w("answers in flight at the kill do not end it, a call that had to go through the new leaders\n")
		w("does. *first completed* is the same for the first answer that completed a new key (its\n")
		w("claim and record written under the new KV leader). Shutdown hands the node's raft\n")
		w("leaderships over before it stops (as a SIGTERM or a rolling restart does), so this is a\n")
		w("graceful kill; the next section crashes the node instead. *new KV leader* and\n")
		w("*consumer leader* are from the kill until a node said it led the stream, or the executors'\n")
		w("consumer when the killed node had led it; *all led again* until every stream and consumer\n")
		w("the node led had a leader elsewhere. The pause beyond that is the executor's and the\n")
		w("client's own: the pauses between their retries.\n\n")
	}
	f := r.Failover
	if f == nil {
		w("Not measured: %s\n\n", escapeCell(r.Err))
		return
	}
	ps := f.pauses()
	if len(ps) > 0 {
		w("**Pause over %d kills: p50 %s ms, max %s ms.**\n\n", len(ps), trimFloat(r.P50), trimFloat(r.Max))
	}
	w("| kill | node | it also held | pause ms | first completed ms | new KV leader ms | consumer leader ms | all led again ms | caught up s | calls ended meanwhile | executor's warnings meanwhile |\n")
	w("|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|\n")
	for i, k := range f.Kills {
		also := strings.Join(k.AlsoHeld, ", ")
		if k.Err != "" {
			also += " — " + k.Err
		}
		w("| %d | %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s |\n", i+1, k.Node, escapeCell(also), msCell(k.PauseMs), msCell(k.CompletedMs),
			msCell(k.KVLeaderMs), msCell(k.ConsumerLeaderMs), msCell(k.LedAgainMs), k.CatchUpMs/1000, outcomeList(k.Outcomes), escapeCell(countList(k.Warnings)))
	}
	w("\nCalls of the whole run (kills and steady load between them): %s", outcomeList(f.Outcomes))
	if len(f.Errors) > 0 {
		w("; the first without an answer: ")
		var firsts []string
		for _, kind := range []string{"no answer", "error"} {
			if e, ok := f.Errors[kind]; ok {
				firsts = append(firsts, fmt.Sprintf("%s: `%s`", kind, escapeCell(e)))
			}
		}
		w("%s", strings.Join(firsts, "; "))
	}
	w(".\n%s: %s\n\n", checkWord(r), escapeCell(r.Check))
}

// msCell prints milliseconds for a table, zero (not measured) as a dash.
func msCell(ms float64) string {
	if ms <= 0 {
		return "—"
	}
	return trimFloat(ms)
}

// countList prints counts by message, largest first, then by message.
func countList(m map[string]int) string {
	type kv struct {
		k string
		n int
	}
	var l []kv
	for k, n := range m {
		l = append(l, kv{k, n})
	}
	slices.SortFunc(l, func(a, b kv) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return strings.Compare(a.k, b.k)
	})
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%d × %s", e.n, e.k)
	}
	return strings.Join(parts, "; ")
}
