package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// MCPServerState is one MCP server's state, as [MCPServers] exports it.
type MCPServerState struct {
	// Server is the server's name in the tools file.
	Server string
	// State is one of the states MCPServers was given.
	State string
}

// mcpCollector asks for the servers' states at each scrape.
type mcpCollector struct {
	states []string
	read   func() []MCPServerState
	desc   *prometheus.Desc
}

// MCPServers registers toolexec_mcp_server_state{server,state}: for each MCP
// server of the tools file, 1 for the state it is in and 0 for each other of
// states, read through read at each scrape. A server down is
// state="down" 1: its tools are listed but their calls are rejected
// upstream_unavailable.
func MCPServers(reg prometheus.Registerer, states []string, read func() []MCPServerState) error {
	return reg.Register(&mcpCollector{
		states: states, read: read,
		desc: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "mcp_server", "state"),
			"The state of each MCP server the tools file names (connecting, connected, down, closed): 1 for the state it is in, 0 for the others. "+
				"While it is down its tools are listed but their calls are rejected upstream_unavailable.",
			[]string{"server", "state"}, nil),
	})
}

// Describe sends the one descriptor.
func (c *mcpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect sends one gauge per server and state.
func (c *mcpCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.read() {
		for _, st := range c.states {
			v := 0.0
			if st == s.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s.Server, st)
		}
	}
}
