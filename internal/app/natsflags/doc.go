// Package natsflags is the one place where toolexec's programs learn how to
// reach NATS: the connection flags, named as the nats CLI names them (--server
// or -s, --creds, --nkey, --user, --password, --token, --tlscert, --tlskey,
// --tlsca, --inbox-prefix, --context, --no-context), the NATS_* variables the
// nats CLI reads, and the nats CLI's saved contexts.
//
// Each option is taken from the first of these that sets it:
//
//  1. its flag (or one of the flag's hidden old spellings, such as the
//     executor's --nats-url and --tls-cert);
//  2. the program's own variable, where the program has one (the executor's
//     TOOLEXEC_NATS_URL, TOOLEXEC_NATS_CREDS, …, see [Config.ProgramEnv]);
//  3. the nats CLI's variable (NATS_URL, NATS_CREDS, NATS_NKEY, NATS_USER,
//     NATS_PASSWORD, NATS_CERT, NATS_KEY, NATS_CA, NATS_CONTEXT);
//  4. the context: the one --context (or its variables) names, else, where
//     [Config.SelectedContext] allows it and --no-context is not given, the one
//     the nats CLI has selected (context.txt).
//
// Credentials travel together: when a flag or variable gives any of --creds,
// --nkey, --user, --password or --token, the context's credentials are all
// set aside, so that a context's credentials file never meets a password given
// on the command line; likewise the context's client certificate and key give
// way together to either of --tlscert and --tlskey. As with the nats CLI, a
// --user (or NATS_USER) without a password is a token.
//
// NATS_TIMEOUT is not read: the nats CLI's timeout is how long it waits for a
// server's reply, and toolexec's --timeout is how long to wait for a tool's
// answer; a value meant for the one would cut the other short.
// NATS_SOCKS_PROXY is not read either: toolexec has no SOCKS dialer.
//
// Contexts are the JSON files the nats CLI keeps in
// $XDG_CONFIG_HOME/nats/context/NAME.json (~/.config/nats/… without
// XDG_CONFIG_HOME). This package reads them itself; a context that sets
// something toolexec cannot honour (an nsc lookup, a SOCKS proxy, a JetStream
// domain or API prefix, a user JWT, TLS before the greeting) is refused with
// an error naming the field, rather than half applied.
package natsflags
