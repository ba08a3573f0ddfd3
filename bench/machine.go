package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/redis/go-redis/v9"
)

// machine describes where the benchmarks ran.
type machine struct {
	Date       time.Time
	CPUs       int
	CPUModel   string
	Memory     string
	Kernel     string
	Go         string
	NATSServer string
	Postgres   string
	Redis      string
	LoadBefore string
	LoadAfter  string
	Elapsed    time.Duration
}

func describeMachine(ctx context.Context, c config) machine {
	m := machine{
		Date: time.Now().UTC(), CPUs: runtime.NumCPU(), Go: runtime.Version(),
		NATSServer: "v" + server.VERSION + " (embedded, file storage)",
		CPUModel:   cpuModel(), Memory: memTotal(), Kernel: readTrim("/proc/sys/kernel/osrelease"),
		LoadBefore: loadAverage(), Postgres: "unreachable", Redis: "unreachable",
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(cctx, c.pgURL); err == nil {
		var v string
		if conn.QueryRow(cctx, "SHOW server_version").Scan(&v) == nil {
			m.Postgres = v
		}
		_ = conn.Close(cctx)
	}
	if opt, err := redis.ParseURL(c.redisURL); err == nil {
		rc := redis.NewClient(opt)
		if info, err := rc.Info(cctx, "server").Result(); err == nil {
			for line := range strings.SplitSeq(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					m.Redis = v
				}
			}
		}
		_ = rc.Close()
	}
	return m
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// loadAverage is the 1, 5 and 15 minute load averages.
func loadAverage() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func memTotal() string {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return "?"
			}
			return fmt.Sprintf("%.1f GiB", kb/1024/1024)
		}
	}
	return "?"
}
