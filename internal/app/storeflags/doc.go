// Package storeflags is the one place where toolexec's programs turn a store
// name and its flags into an idempotency store: the flags (--store,
// --postgres-url, --postgres-schema, --postgres-max-batch, --ensure-schema,
// --redis-url, --redis-prefix, --retention) with their TOOLEXEC_* variables,
// their checks, and opening the backend (memory, jetstream, postgres, redis).
//
// The executor registers them with [Serve]: the store it runs on, set up if
// need be. The emitter registers them with [Administer]: an operator working on
// the store an executor left behind, changing nothing of its set-up, with
// --store empty meaning "ask an executor instead". The two differ in defaults,
// help texts and what they allow, as each program documents; the names, the
// variables and the way a backend is opened are shared.
package storeflags
