// Package deploy holds the shipped NATS configurations to their word: the
// files themselves live in the repository's deploy/ folder (nats.conf, one
// server without authentication; accounts.conf, an account per tenant, one for
// the executors and one for the admin, joined by exports and imports).
//
// It has no Go API. Its tests load deploy/accounts.conf exactly as shipped into
// an embedded server, run three executors, the tenants, the admin and a
// worker serving tool bodies against it, and try every attack found on the
// single-account file it replaced (and those a tenant may try on the workers:
// reaching their bodies or their service API, passing for one, seeing a
// body's request): each
// attack is played against that old file too (testdata/tenants.conf, kept for
// this only), where it must land, and against accounts.conf, where it must not.
// See accounts.conf's comments for what each account may do and why.
package deploy
