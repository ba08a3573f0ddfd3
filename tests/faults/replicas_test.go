package faults_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// replica is what one node holds of one stream, as its own monitoring reports
// it (/jsz): each node answers for its own copy, never for the leader's.
type replica struct {
	Msgs, Bytes, FirstSeq, LastSeq uint64
	Deleted                        int
	Lost                           string // the data the node reports lost, if any
	// Delivered holds the stream's durable consumers by name, each with the
	// stream sequence of its last delivery.
	Delivered map[string]uint64
	// AckFloor holds the same consumers' acknowledgement floors (stream
	// sequences). A follower learns of acknowledgements only as they are
	// replicated, and may lag behind the leader's floor while nothing else
	// happens: it is reported, not compared.
	AckFloor map[string]uint64
}

func (r replica) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "msgs=%d bytes=%d seq=%d..%d deleted=%d", r.Msgs, r.Bytes, r.FirstSeq, r.LastSeq, r.Deleted)
	if r.Lost != "" {
		fmt.Fprintf(&b, " LOST=%s", r.Lost)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Delivered)) {
		fmt.Fprintf(&b, " %s:delivered=%d", name, r.Delivered[name])
	}
	return b.String()
}

// replicasOf returns the streams of the global account in a node's /jsz
// report (with accounts, streams and consumers), by name.
func replicasOf(info *server.JSInfo) map[string]replica {
	out := map[string]replica{}
	for _, acc := range info.AccountDetails {
		if acc.Name != natstest.GlobalAccount {
			continue
		}
		for _, sd := range acc.Streams {
			st := sd.State
			r := replica{
				Msgs: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq,
				Deleted: st.NumDeleted, Delivered: map[string]uint64{}, AckFloor: map[string]uint64{},
			}
			if st.Lost != nil && (len(st.Lost.Msgs) > 0 || st.Lost.Bytes > 0) {
				r.Lost = fmt.Sprintf("%d messages, %d bytes", len(st.Lost.Msgs), st.Lost.Bytes)
			}
			for _, ci := range sd.Consumer {
				if ci.Config == nil || ci.Config.Durable == "" {
					continue // an ephemeral consumer lives on one node (the answers' reader)
				}
				r.Delivered[ci.Name] = ci.Delivered.Stream
				r.AckFloor[ci.Name] = ci.AckFloor.Stream
			}
			out[sd.Name] = r
		}
	}
	return out
}

// jszOptions asks /jsz for what replicasOf reads.
var jszOptions = &server.JSzOptions{Accounts: true, Streams: true, Consumer: true, Config: true}

// inProcessJsz returns a jsz function for waitReplicasAgree over in-process
// servers: each one's own report.
func inProcessJsz(servers func() []*server.Server) func() (map[string]*server.JSInfo, error) {
	return func() (map[string]*server.JSInfo, error) {
		out := map[string]*server.JSInfo{}
		for _, s := range servers() {
			info, err := s.Jsz(jszOptions)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.Name(), err)
			}
			out[s.Name()] = info
		}
		return out, nil
	}
}

// waitReplicasAgree waits until every node (jsz returns each node's report,
// by node name) holds every stream of the others, in the same state, with no
// data reported lost, and returns that state by stream, with each node's
// acknowledgement floors (node -> stream -> consumer -> floor). It fails the
// test with the last difference seen when timeout passes.
func waitReplicasAgree(t *testing.T, timeout time.Duration, jsz func() (map[string]*server.JSInfo, error)) (map[string]replica, map[string]map[string]map[string]uint64) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		agreed, floors, diff := replicasAgree(jsz)
		if diff == "" {
			return agreed, floors
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes' replicas disagree after %v: %s", timeout, diff)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// replicasAgree returns the state every node agrees on and each node's
// acknowledgement floors, or a description of the first difference.
func replicasAgree(jsz func() (map[string]*server.JSInfo, error)) (map[string]replica, map[string]map[string]map[string]uint64, string) {
	infos, err := jsz()
	if err != nil {
		return nil, nil, err.Error()
	}
	nodes := slices.Sorted(maps.Keys(infos))
	if len(nodes) == 0 {
		return nil, nil, "no node answered"
	}
	want := replicasOf(infos[nodes[0]])
	if len(want) == 0 {
		return nil, nil, nodes[0] + " holds no stream"
	}
	floors := map[string]map[string]map[string]uint64{}
	for _, node := range nodes {
		got := replicasOf(infos[node])
		floors[node] = map[string]map[string]uint64{}
		for _, name := range slices.Sorted(maps.Keys(want)) {
			g, ok := got[name]
			switch {
			case !ok:
				return nil, nil, fmt.Sprintf("%s has no replica of %s", node, name)
			case g.Lost != "":
				return nil, nil, fmt.Sprintf("%s reports %s of %s lost", node, g.Lost, name)
			case g.String() != want[name].String():
				return nil, nil, fmt.Sprintf("%s: %s holds %s, %s holds %s", name, nodes[0], want[name], node, g)
			}
			floors[node][name] = g.AckFloor
		}
		if len(got) != len(want) {
			return nil, nil, fmt.Sprintf("%s holds %d streams, %s %d", nodes[0], len(want), node, len(got))
		}
	}
	return want, floors, ""
}

// logReplicas logs the state the nodes agree on, one stream a line, and the
// acknowledgement floors of consumers whose replicas report different ones.
func (s *scenario) logReplicas(agreed map[string]replica, floors map[string]map[string]map[string]uint64) {
	s.t.Helper()
	for _, name := range slices.Sorted(maps.Keys(agreed)) {
		s.step("replicas agree: %s %s", name, agreed[name])
		for consumer := range agreed[name].Delivered {
			var each []string
			differ := false
			for _, node := range slices.Sorted(maps.Keys(floors)) {
				f := floors[node][name][consumer]
				each = append(each, fmt.Sprintf("%s=%d", node, f))
				differ = differ || f != agreed[name].AckFloor[consumer]
			}
			if differ {
				s.step("replicas of consumer %s of %s report different acknowledgement floors: %s", consumer, name, strings.Join(each, " "))
			}
		}
	}
}
