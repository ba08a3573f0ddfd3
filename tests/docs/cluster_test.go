package docs_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// clusterCommands are the script commands for the README's existing NATS
// cluster.
//
//	natscluster CREDS        a three-node JetStream cluster of the script's own,
//	                         trusting an operator (JWT accounts, as a deployed
//	                         cluster does), and CREDS a user's credentials file of
//	                         its one JetStream account; N1, N2 and N3 are the
//	                         nodes' host:port
//	replicas STREAM N        with CREDS on N1, stream STREAM has N replicas
//	airline                  the demo airline over HTTP, as examples/tools.yaml
//	                         expects it: AIRLINE_URL and AIRLINE_TOKEN
var clusterCommands = map[string]func(*testscript.TestScript, bool, []string){
	"natscluster": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: natscluster CREDS")
		}
		operator, err := nkeys.CreateOperator()
		ts.Check(err)
		opPub, err := operator.PublicKey()
		ts.Check(err)
		account := func(name string, js bool) (string, string, nkeys.KeyPair) {
			kp, err := nkeys.CreateAccount()
			ts.Check(err)
			pub, err := kp.PublicKey()
			ts.Check(err)
			c := jwt.NewAccountClaims(pub)
			c.Name = name
			if js {
				c.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
			}
			token, err := c.Encode(operator)
			ts.Check(err)
			return pub, token, kp
		}
		sysPub, sysJWT, _ := account("SYS", false)
		appPub, appJWT, appKey := account("APP", true)
		oc := jwt.NewOperatorClaims(opPub)
		oc.Name = "docs"
		oc.SystemAccount = sysPub
		opJWT, err := oc.Encode(operator)
		ts.Check(err)
		trusted, err := jwt.DecodeOperatorClaims(opJWT)
		ts.Check(err)

		user, err := nkeys.CreateUser()
		ts.Check(err)
		userPub, err := user.PublicKey()
		ts.Check(err)
		uc := jwt.NewUserClaims(userPub)
		uc.Name = "executor"
		userJWT, err := uc.Encode(appKey)
		ts.Check(err)
		seed, err := user.Seed()
		ts.Check(err)
		creds, err := jwt.FormatUserConfig(userJWT, seed)
		ts.Check(err)
		ts.Check(os.WriteFile(ts.MkAbs(args[0]), creds, 0o600))

		dir, err := os.MkdirTemp(ts.Getenv("WORK"), "cluster")
		ts.Check(err)
		servers, err := natstest.RunCluster(dir, 3, func(o *server.Options) {
			r := &server.MemAccResolver{}
			ts.Check(r.Store(sysPub, sysJWT))
			ts.Check(r.Store(appPub, appJWT))
			o.TrustedOperators = []*jwt.OperatorClaims{trusted}
			o.SystemAccount = sysPub
			o.AccountResolver = r
		})
		ts.Check(err)
		ts.Defer(func() { natstest.Shutdown(servers...) })
		for i, s := range servers {
			setenv(ts, fmt.Sprintf("N%d", i+1), strings.TrimPrefix(s.ClientURL(), "nats://"))
		}
		state(ts).creds = ts.MkAbs(args[0])
		// A node enables JetStream for an account when it first loads the
		// account: until every node has, a request it serves may find none
		// ("jetstream not enabled for account"). A deployed cluster is long
		// past that; this one is waited for.
		for _, s := range servers {
			ts.Check(accountJetStreamReady(s.ClientURL(), state(ts).creds))
		}
	},
	"replicas": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: replicas STREAM N")
		}
		nc, err := nats.Connect("nats://"+ts.Getenv("N1"), nats.UserCredentials(state(ts).creds))
		ts.Check(err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		ts.Check(err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, args[0])
		ts.Check(err)
		info, err := st.Info(ctx)
		ts.Check(err)
		if got := fmt.Sprint(info.Config.Replicas); got != args[1] {
			ts.Fatalf("%s has %s replicas, want %s", args[0], got, args[1])
		}
	},
	"airline": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 0 {
			ts.Fatalf("usage: airline")
		}
		srv := httptest.NewServer(demo.New().Handler())
		ts.Defer(srv.Close)
		setenv(ts, "AIRLINE_URL", srv.URL)
		setenv(ts, "AIRLINE_TOKEN", "docs-token")
	},
}

// accountJetStreamReady waits (up to 20 s) until the server at url answers
// the credentials' account's JetStream account info.
func accountJetStreamReady(url, creds string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := func() error {
			nc, err := nats.Connect(url, nats.UserCredentials(creds))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
			return err
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the account's JetStream: %w", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
