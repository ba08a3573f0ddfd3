package main

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// clusterName names the one-node cluster.
const clusterName = "active"

// serverConfig is how the embedded Temporal server is set up.
type serverConfig struct {
	dbPath string // the SQLite file
	// visPath, when set, is a second SQLite file for visibility records, so
	// that their writes do not queue behind the executions' on one connection.
	visPath string
	// pgURL, when set, puts both in PostgreSQL databases instead.
	pgURL     string
	namespace string
	shards    int
	// synchronous is SQLite's synchronous pragma (NORMAL: a commit reaches
	// the WAL file, fsynced at checkpoints; FULL: every commit is fsynced).
	synchronous string
	sqlConns    int
	dynamic     dynamicconfig.StaticClient
}

// embedded is a running Temporal server and the address of its frontend.
type embedded struct {
	server   temporal.Server
	frontend string
}

// sqlConfig is a SQLite data store in file path, in WAL mode so that readers
// need not wait for the writer.
func (c serverConfig) sqlConfig(path string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		MaxConns:     c.sqlConns,
		MaxIdleConns: c.sqlConns,
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  c.synchronous,
			"busy_timeout": "10000",
		},
	}
}

// stores are the data stores of c: executions and visibility in one SQLite
// file, in two (visPath), or in two PostgreSQL databases (pgURL), created
// with their schemas; and the name of the visibility store.
func (c serverConfig) stores() (map[string]config.DataStore, string, error) {
	if c.pgURL != "" {
		executions, visibility, err := pgStores(c.pgURL, c.sqlConns)
		if err != nil {
			return nil, "", err
		}
		return map[string]config.DataStore{"executions": {SQL: executions}, "visibility": {SQL: visibility}}, "visibility", nil
	}
	sqlCfg := c.sqlConfig(c.dbPath)
	if err := sqlite.SetupSchema(sqlCfg); err != nil {
		return nil, "", fmt.Errorf("creating the SQLite schema in %s: %w", c.dbPath, err)
	}
	stores := map[string]config.DataStore{"executions": {SQL: sqlCfg}}
	if c.visPath == "" {
		return stores, "executions", nil
	}
	visCfg := c.sqlConfig(c.visPath)
	if err := sqlite.SetupSchema(visCfg); err != nil {
		return nil, "", fmt.Errorf("creating the SQLite schema in %s: %w", c.visPath, err)
	}
	stores["visibility"] = config.DataStore{SQL: visCfg}
	return stores, "visibility", nil
}

// startServer creates the schema and namespace in a new SQLite file and
// starts frontend, history, matching and worker services in this process.
func startServer(c serverConfig) (*embedded, error) {
	stores, visibility, err := c.stores()
	if err != nil {
		return nil, err
	}
	ns, err := sqlite.NewNamespaceConfig(clusterName, c.namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", c.namespace, err)
	}
	if err := sqlite.CreateNamespaces(stores["executions"].SQL, ns); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", c.namespace, err)
	}
	ports, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	frontend := "127.0.0.1:" + strconv.Itoa(ports[0])
	cfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: "127.0.0.1"},
			PProf:      config.PProf{Port: 0},
		},
		Persistence: config.Persistence{
			DefaultStore:     "executions",
			VisibilityStore:  visibility,
			NumHistoryShards: int32(c.shards),
			DataStores:       stores,
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": service(ports[0], ports[1]),
			"history":  service(ports[2], ports[3]),
			"matching": service(ports[4], ports[5]),
			"worker":   service(ports[6], ports[7]),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: frontend},
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(log.NewNoopLogger()),
		temporal.WithDynamicConfigClient(c.dynamic),
	)
	if err != nil {
		return nil, fmt.Errorf("creating the Temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("starting the Temporal server: %w", err)
	}
	return &embedded{server: srv, frontend: frontend}, nil
}

// service is one service's gRPC and membership ports on the loopback.
func service(grpc, membership int) config.Service {
	return config.Service{RPC: config.RPC{GRPCPort: grpc, MembershipPort: membership, BindOnIP: "127.0.0.1"}}
}

// firstPort is where the search for free ports starts: below 32768, because
// Temporal's SQL schemas keep membership ports in a smallint column.
const firstPort = 21233

// freePorts returns n ports free on the loopback, from firstPort upwards,
// held open together so that they differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	for p := firstPort; p < 32768 && len(ports) < n; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // taken
		}
		defer l.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("found %d free ports from %d, want %d", len(ports), firstPort, n)
	}
	return ports, nil
}
