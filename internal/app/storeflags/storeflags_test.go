package storeflags_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec/internal/app/storeflags"
)

func TestEnvName(t *testing.T) {
	if got := storeflags.EnvName("postgres-max-batch"); got != "TOOLEXEC_POSTGRES_MAX_BATCH" {
		t.Errorf("EnvName = %q", got)
	}
}

// parse registers the flags of use and parses args.
func parse(t *testing.T, use storeflags.Use, args ...string) *storeflags.Flags {
	t.Helper()
	var f storeflags.Flags
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.Register(fs, use)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f
}

func TestDefaults(t *testing.T) {
	f := parse(t, storeflags.Serve)
	if f.Kind != storeflags.JetStream || f.PostgresSchema != "toolexec" || f.RedisPrefix != "toolexec" ||
		f.Retention != 24*time.Hour || f.PostgresMaxBatch < 1 || f.EnsureSchema {
		t.Errorf("Serve defaults: %+v", f)
	}
	if err := f.Check(); err != nil {
		t.Errorf("Serve defaults: %v", err)
	}
	f = parse(t, storeflags.Administer)
	if f.Kind != "" || f.PostgresSchema != "toolexec" || f.RedisPrefix != "toolexec" || f.Retention != 24*time.Hour {
		t.Errorf("Administer defaults: %+v", f)
	}
	if err := f.Check(); err != nil {
		t.Errorf("Administer defaults: %v", err)
	}
}

func TestCheck(t *testing.T) {
	t.Setenv("TOOLEXEC_POSTGRES_URL", "")
	t.Setenv("TOOLEXEC_REDIS_URL", "")
	t.Setenv("TOOLEXEC_RETENTION", "")
	for _, tt := range []struct {
		name string
		use  storeflags.Use
		args []string
		want string
	}{
		{"serve: unknown store", storeflags.Serve, []string{"--store", "etcd"}, `--store "etcd": want jetstream, postgres, redis or memory`},
		{"serve: postgres without url", storeflags.Serve, []string{"--store", "postgres"}, "--store postgres needs --postgres-url (or TOOLEXEC_POSTGRES_URL)"},
		{"serve: redis without url", storeflags.Serve, []string{"--store", "redis"}, "--store redis needs --redis-url (or TOOLEXEC_REDIS_URL)"},
		{"serve: zero batch", storeflags.Serve, []string{"--postgres-max-batch", "0"}, "--postgres-max-batch 0: must be at least 1"},
		{"administer: url without store", storeflags.Administer, []string{"--redis-url", "redis://x"}, "--redis-url needs --store"},
		{"administer: memory", storeflags.Administer, []string{"--store", "memory"}, `--store "memory": want jetstream, postgres or redis`},
		{"administer: postgres without url", storeflags.Administer, []string{"--store", "postgres"}, "--store postgres needs --postgres-url"},
		{"administer: retention with jetstream", storeflags.Administer, []string{"--store", "jetstream", "--retention", "1h"}, "--retention is the KV bucket's own with --store jetstream"},
		{"administer: zero retention", storeflags.Administer, []string{"--store", "redis", "--redis-url", "redis://x", "--retention", "0s"}, "--retention 0s: must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := parse(t, tt.use, tt.args...).Check()
			var ue *storeflags.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v; want a *UsageError saying %q", err, tt.want)
			}
		})
	}
}

// TestAdministerFromEnvironment: with --store, the flags not given take the
// executor's variables.
func TestAdministerFromEnvironment(t *testing.T) {
	t.Setenv("TOOLEXEC_REDIS_URL", "redis://cache:6379/0")
	t.Setenv("TOOLEXEC_REDIS_PREFIX", "from-env")
	t.Setenv("TOOLEXEC_RETENTION", "48h")
	f := parse(t, storeflags.Administer, "--store", "redis", "--redis-prefix", "from-flag")
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if f.RedisURL != "redis://cache:6379/0" || f.RedisPrefix != "from-flag" || f.Retention != 48*time.Hour {
		t.Errorf("flags after Check: %+v", f)
	}
	t.Setenv("TOOLEXEC_RETENTION", "a day")
	f = parse(t, storeflags.Administer, "--store", "redis")
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "TOOLEXEC_RETENTION") {
		t.Errorf("Check with a bad variable = %v", err)
	}
}

func TestDescribeHidesPasswords(t *testing.T) {
	f := parse(t, storeflags.Administer, "--store", "postgres", "--postgres-url", "postgres://ops:s3cret@db/x", "--postgres-schema", "s")
	if got := f.Describe(); got != "the PostgreSQL store at postgres://ops:xxxxx@db/x (schema s)" {
		t.Errorf("Describe = %q", got)
	}
}

func TestOpenRefusals(t *testing.T) {
	for _, tt := range []struct {
		name string
		use  storeflags.Use
		args []string
		want string
	}{
		{"unknown store", storeflags.Serve, []string{"--store", "etcd"}, `unknown store "etcd"`},
		{"bad redis url", storeflags.Serve, []string{"--store", "redis", "--redis-url", "nope://"}, "--redis-url"},
		{"bad postgres url", storeflags.Administer, []string{"--store", "postgres", "--postgres-url", "::"}, "--postgres-url"},
		{"bad schema", storeflags.Administer, []string{"--store", "postgres", "--postgres-url", "postgres://127.0.0.1:1/x", "--postgres-schema", "Bad-Schema"}, "schema"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parse(t, tt.use, tt.args...).Open(context.Background(), nil, 0, nil)
			var ue *storeflags.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v; want a *UsageError naming %q", err, tt.want)
			}
		})
	}
}
