package docs_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rogpeppe/go-internal/testscript"
)

// nscCommands are the script commands that serve the stand-in's layout.
//
//	natsserver CONF          a NATS server of the script's own on $PORT_4222, with
//	                         JetStream, including CONF (what nsc generate config
//	                         wrote: the operator, the nats resolver)
var nscCommands = map[string]func(*testscript.TestScript, bool, []string){
	"natsserver": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: natsserver CONF")
		}
		// The server runs in the test's process, whose working directory is
		// not the script's: the resolver's folder, relative in CONF, is put
		// in the script's folder.
		included := strings.ReplaceAll(ts.ReadFile(args[0]), "'./jwt'", strconv.Quote(ts.MkAbs("jwt")))
		text := fmt.Sprintf("listen: 127.0.0.1:%s\njetstream {\n  store_dir: %q\n}\n%s",
			ts.Getenv("PORT_4222"), ts.MkAbs("jetstream"), included)
		conf := ts.MkAbs("server.conf")
		ts.Check(os.WriteFile(conf, []byte(text), 0o600))
		opts, err := server.ProcessConfigFile(conf)
		ts.Check(err)
		opts.NoSigs, opts.NoLog = true, true
		s, err := server.NewServer(opts)
		ts.Check(err)
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			ts.Fatalf("the NATS server did not start")
		}
		ts.Defer(func() { s.Shutdown(); s.WaitForShutdown() })
	},
}
