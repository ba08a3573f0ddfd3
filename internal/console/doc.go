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
// The console is protected by a token ([Config.Token], required): a browser
// signs in once with it and holds an HttpOnly, SameSite=Strict session cookie
// derived from it; scripts may send it as a bearer token instead. State
// changes are POSTs that cross-origin requests cannot make, and the pages
// forbid inline script and framing; only their stylesheet and script are
// served as files. Serve it on a loopback or private address, or behind a TLS
// proxy.
package console
