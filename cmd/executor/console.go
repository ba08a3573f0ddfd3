package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/internal/app/console"
)

// consoleFlags are the operators' console's flags.
type consoleFlags struct {
	addr, token, operatorsFile string
}

func (f *consoleFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.addr, "console-addr", "",
		"address of the operators' web console (e.g. 127.0.0.1:8081); empty: off; needs --console-operators-file or --console-token")
	fs.StringVar(&f.operatorsFile, "console-operators-file", "",
		"file of \"<operator> sha256:<hex> admin|tenants=<t>,…\" lines: each operator signs in to the console with their own token, and the "+
			"audit trail names them (make a line with: emitter console-token)")
	fs.StringVar(&f.token, "console-token", "",
		"a token shared by whoever signs in to the console with it: an admin, recorded by the name typed, marked unverified; prefer "+
			"--console-operators-file (and TOOLEXEC_CONSOLE_TOKEN to this flag: flags show in ps)")
}

// check refuses a console nobody can sign in to, and console settings with no
// console.
func (f consoleFlags) check() error {
	switch {
	case f.addr == "" && (f.token != "" || f.operatorsFile != ""):
		return errors.New("--console-token and --console-operators-file need --console-addr")
	case f.addr != "" && f.token == "" && f.operatorsFile == "":
		return errors.New(
			"--console-addr needs operators: set --console-operators-file (TOOLEXEC_CONSOLE_OPERATORS_FILE), or a shared token in " +
				"TOOLEXEC_CONSOLE_TOKEN (or --console-token)")
	case f.token != "" && utf8.RuneCountInString(f.token) < console.MinTokenLength:
		return fmt.Errorf("the shared console token (TOOLEXEC_CONSOLE_TOKEN or --console-token) is %d characters; it must have at least %d, "+
			"so that nobody guesses it (emitter console-token --operator NAME --admin draws a 256-bit one for an operators file)",
			utf8.RuneCountInString(f.token), console.MinTokenLength)
	}
	return nil
}

// startConsole serves the operators' console: resolutions go through adm (the
// admin path, in process), the feed through a client's watches, the admins'
// search through the events stream.
func startConsole(f consoleFlags, js jetstream.JetStream, adm *admin.Service, log *slog.Logger) (func(), error) {
	cfg := console.Config{Token: f.token, Operator: adm, Searcher: console.StreamSearcher{JS: js}, Logger: log}
	if f.operatorsFile != "" {
		ops, err := console.LoadOperators(f.operatorsFile)
		if err != nil {
			return nil, usageError{err}
		}
		cfg.Operators = ops
	}
	client, err := toolexec.NewClient(js.Conn(), toolexec.WithLogger(log))
	if err != nil {
		return nil, err
	}
	cfg.Watcher = client
	con, err := console.New(cfg)
	if err != nil {
		return nil, usageError{err}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := con.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	stop, err := serveHTTP("--console-addr", f.addr, con.Handler(), log)
	if err != nil {
		cancel()
		con.Wait()
		return nil, err
	}
	return func() {
		cancel() // ends the feed and the pages' event streams
		stop()
		con.Wait()
	}, nil
}
