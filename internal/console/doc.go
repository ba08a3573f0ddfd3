// Package console is the operators' web console the executor serves with
// --console-addr: a live feed of deduplicated, indeterminate and resolved
// events, a tenant's indeterminate records with their age, and the actions
// that resolve them — complete with an outcome, or release.
//
// It is server-rendered HTML with one small embedded script that follows the
// feed through Server-Sent Events (fed by bus.Client.Watch); there is no build
// step and nothing is loaded from elsewhere. Resolutions go through the admin
// path ([Operator]: admin.Service in process, or admin.Client over the admin
// subjects), so each is checked the same way and publishes the same resolved
// audit event, naming the operator who signed in.
//
// The console is protected by a token ([Config.Token], required). A browser
// signs in with it once and gets a session: a random 256-bit id, the only
// thing its cookie holds (HttpOnly, SameSite=Strict, Secure over TLS), kept
// in the console's memory with the operator's name, so that the resolved
// events name whoever signed in. A session ends when its browser signs out —
// a copy of the cookie opens nothing after that — after [Config.SessionIdle]
// without a request, [Config.SessionLifetime] after sign-in, or when
// [Config.MaxSessions] newer ones push it out; a restart ends them all. An
// open live feed ends with its session. Scripts may send the token as a
// bearer token instead of signing in.
//
// Wrong tokens, at sign-in or as bearer tokens, are throttled. Each remote
// address (the connection's, never a forwarded header; an IPv6 /64 counts as
// one) may send five; after that it is locked out for 2 s, doubling with each
// further wrong token up to 15 min, and while it is locked out no token it
// sends is checked, the right one included: it is answered 429 with
// Retry-After. A right token, or an hour without a wrong one, clears the
// address. All addresses together may send about five wrong tokens a second
// (in bursts of 25); beyond that no token is checked until the budget
// refills, so that many addresses cannot guess much faster than one. An
// address's first wrong token and each lock-out are logged at WARN, not every
// refusal. Behind a proxy every browser shares the proxy's address, and its
// lock-outs.
//
// State changes are POSTs that cross-origin requests cannot make, and the
// pages forbid inline script and framing. Only the pages' stylesheet and
// script are served under /static/. Serve the console on a loopback or
// private address, or behind a TLS proxy.
package console
