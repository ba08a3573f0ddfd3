// Package console is the operators' web console the executor serves with
// --console-addr: a live feed of every event (the five answer kinds and the
// resolutions; when it is full the routine answers go first), filtered by
// kind; a tenant's indeterminate records with their
// age, updated live; the actions that resolve them — complete with an
// outcome, or release, which first asks to confirm; and, for admins, a view
// across tenants with a search of the stored events by idempotency key, run
// id or call id.
//
// It is server-rendered HTML with one small embedded script that follows the
// feed through Server-Sent Events (fed by toolexec.Client.Watch), reloads the
// records table when the feed says a record came or went, and marks a feed
// item settled once its key is resolved; there is no build step and nothing
// is loaded from elsewhere, and every action works without the script.
// Resolutions go through the admin path ([Operator]: admin.Service in
// process, or admin.Client over the admin subjects), so each is checked the
// same way and publishes the same resolved audit event, naming the operator
// who signed in. The view across tenants lists the records of each tenant
// with an indeterminate event in the latest stored events (admin.ListRequest
// is one tenant's), and searches them through a [Searcher]:
// [StreamSearcher] reads TOOLEXEC_EVENTS by subject filter (a run or call id
// is a token of the event's subject; a key is checked event by event).
//
// # Who signs in
//
// Operators sign in with their own tokens ([Config.Operators], read by
// [LoadOperators] from a file of "<operator> sha256:<hex> <scope>" lines,
// package tokenfile's format; emitter console-token makes a line). The file
// holds the tokens' SHA-256 digests only, and a token is compared with every
// line in constant time. The scope is "admin" (every tenant, and the view
// across them) or "tenants=acme,globex": such an operator's page, records,
// feed and event stream show those tenants only, and a resolution of any
// other tenant is refused 403. The resolved audit events carry the operator's
// name from the file.
//
// A shared token ([Config.Token], --console-token) still works: whoever holds
// it is an admin, named by what they type at sign-in, and the audit events
// mark that name [Unverified]. One of the two is required.
//
// A browser signs in once and gets a session: a random 256-bit id, the only
// thing its cookie holds (HttpOnly, SameSite=Strict, Secure over TLS, and
// Max-Age and Expires of [Config.SessionLifetime], so that the browser drops
// it when the session ends), kept in the console's memory with who signed in.
// A session ends when its browser signs out — a copy of the cookie opens
// nothing after that — after [Config.SessionIdle] without a request,
// [Config.SessionLifetime] after sign-in, or when [Config.MaxSessions] newer
// ones push it out; a restart ends them all. An open live feed ends with its
// session. Scripts may send a token as a bearer token instead of signing in.
//
// Wrong tokens, at sign-in or as bearer tokens, are throttled. Each remote
// address (the connection's, never a forwarded header; an IPv6 /64 counts as
// one) may send five; after that it is locked out for 2 s, doubling with each
// further wrong token up to 15 min, and while it is locked out its wrong
// tokens are answered 429 with Retry-After. All addresses together may send
// about five wrong tokens a second (in bursts of 25); beyond that an
// address's first wrong token locks it out at once, so that many addresses
// cannot each spend a budget. An hour without a wrong token clears an
// address. The right token gets in whatever the throttle holds, from a
// locked-out address too: a flood of wrong tokens, or a guesser behind the
// same proxy, cannot shut the console to the token's owner. Every token is
// compared, so what stops guessing is the token's length: give operators the
// 256-bit tokens emitter console-token draws, and a shared token as long. An
// address's first wrong token and each lock-out are logged at WARN, not every
// refusal, and a spent global budget once a minute.
//
// State changes are POSTs that cross-origin requests cannot make, and the
// pages forbid inline script and framing. Only the pages' stylesheet and
// script are served under /static/. Serve the console on a loopback or
// private address, or behind a TLS proxy.
package console
