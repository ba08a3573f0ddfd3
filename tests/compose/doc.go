// Package compose holds docker-compose.yml to what its header and comments
// say: every long-running service has a healthcheck and restarts unless
// stopped, waits for what it needs to be healthy, publishes on 127.0.0.1
// only, takes its passwords from .env (and compose refuses to start without
// them), runs NATS on the embedded server's minor release, ensures the
// PostgreSQL schema, mounts files that exist, and scrapes and shows the
// executors. It has no Go API.
//
// Docker images cannot be pulled where these tests run, so the stack itself
// is not started: `docker-compose config` checks the file, the executor runs
// here with the environment the file gives it, and the header's emitter
// command is run against it.
package compose
