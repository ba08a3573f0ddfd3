// Package deploy holds the files toolexec is deployed with: the NATS server
// configurations nats.conf (one server, no authentication) and tenants.conf (one
// user per tenant, an executor identity and an admin, fenced by publish and
// subscribe permissions).
//
// It has no Go API. Its tests load tenants.conf exactly as shipped into an
// embedded server and check each permission it promises, by running the bus
// Client, Worker and admin requests against it; see tenants.conf's comments for
// what each identity may do and why.
package deploy
