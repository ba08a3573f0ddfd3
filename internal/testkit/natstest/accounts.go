package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ExecutorAccount is the account of the executors in a server started by
// [StartAccounts], and AdminAccount the operators'.
const (
	ExecutorAccount = "TOOLEXEC"
	AdminAccount    = "ADMIN"
)

// accountsConf is the configuration StartAccounts writes: the executors'
// account exports the calls service, the answers stream and the history
// service with the tenant token bound to the importing account
// (account_token_position 3); each tenant account imports its own and has no
// JetStream; ADMIN imports the admin subjects and every tenant's events, as in
// deploy/accounts.conf.
const accountsConf = `
listen: "127.0.0.1:-1"
server_name: natstest_accounts
jetstream { store_dir: %q }
no_auth_user: executor
accounts {
  TOOLEXEC {
    jetstream: enabled
    users: [ { user: executor, password: executor } ]
    exports: [
      { service: "toolexec.call.*.>", account_token_position: 3 }
      { stream: "toolexec.event.*.>", account_token_position: 3 }
      { service: "toolexec.history.*", account_token_position: 3 }
      { service: "toolexec.admin.>", accounts: [ADMIN] }
      { stream: "toolexec.event.*.*.*.*.*", accounts: [ADMIN] }
    ]
  }
  ADMIN {
    users: [ { user: admin, password: admin } ]
    imports: [
      { service: { account: TOOLEXEC, subject: "toolexec.admin.>" } }
      { stream: { account: TOOLEXEC, subject: "toolexec.event.*.*.*.*.*" } }
    ]
  }
%s}
`

const tenantConf = `  %[1]s {
    users: [ { user: %[1]s, password: %[1]s } ]
    imports: [
      { service: { account: TOOLEXEC, subject: "toolexec.call.%[1]s.>" } }
      { stream: { account: TOOLEXEC, subject: "toolexec.event.%[1]s.>" } }
      { service: { account: TOOLEXEC, subject: "toolexec.history.%[1]s" } }
    ]
  }
`

// StartAccounts runs a single-node server with the account layout of toolexec's
// tenants: the executors, their streams and their KV bucket in account
// [ExecutorAccount] (user and password "executor", also the user of a
// connection that gives no credentials, as [Connect]'s do); each tenant an
// account of its own name (user and password the name) that imports only its
// calls (service toolexec.call.<tenant>.>), its answers (stream
// toolexec.event.<tenant>.>) and its history (service
// toolexec.history.<tenant>), and has no JetStream; and the operators, account
// [AdminAccount] (user and password "admin"), importing the admin subjects
// (service toolexec.admin.>) and every tenant's events (stream
// toolexec.event.*.*.*.*.*), without JetStream either. The configuration is
// written to a file and loaded as a deployment's would be; the server stores
// its data under t.TempDir() and is shut down when the test ends.
func StartAccounts(t testing.TB, tenants ...string) *server.Server {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for _, tenant := range tenants {
		fmt.Fprintf(&b, tenantConf, tenant)
	}
	conf := filepath.Join(dir, "accounts.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, accountsConf, filepath.Join(dir, "jetstream"), b.String()), 0o600); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("natstest: the server refuses %s: %v", conf, err)
	}
	o.NoLog, o.NoSigs = true, true
	s, err := run(o)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() { Shutdown(s) })
	return s
}

// ConnectAs connects to a server of [StartAccounts] as user (whose password is
// its name) and closes the connection when the test ends.
func ConnectAs(t testing.TB, s *server.Server, user string) *nats.Conn {
	t.Helper()
	return Connect(t, s, nats.UserInfo(user, user))
}
