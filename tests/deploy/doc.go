// Package deploy holds the shipped NATS configurations to their word: the
// files themselves live in the repository's deploy/ folder (nats.conf, one
// server without authentication; tenants.conf, one user per tenant, an
// executor identity and an admin, fenced by publish and subscribe permissions).
//
// It has no Go API. Its tests load deploy/tenants.conf exactly as shipped into
// an embedded server and check each permission it promises, by running the bus
// Client and Worker and the admin client against it; see tenants.conf's
// comments for what each identity may do and why.
package deploy
