// Package dbproc runs PostgreSQL and Redis servers of a test's own, so that a
// test may stop, crash and restart them without disturbing the shared servers
// other tests use, and opens stores on the shared servers in a schema or key
// prefix of the test's own.
//
// [StartPostgres] runs initdb and postgres from the Debian packages
// (/usr/lib/postgresql/<version>/bin, or the directory in TEST_PG_BIN) on a free
// port of 127.0.0.1, with its data and unix socket in a temporary directory;
// running as root, both run as the postgres user. [StartRedis] runs redis-server
// with AOF and fsync on every write (appendfsync always) on a free port. Both
// servers are children of the test process: they die with it, and t.Cleanup
// stops them and removes their data.
//
// When the binaries are missing, the test is skipped with a message naming the
// package to install — or, under CI=true, fails: a CI run must not pass a test
// that did nothing.
package dbproc
