package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCommand is `executor healthcheck`: it asks a running
// executor's /readyz (or --path) and exits 0 when it answers 200. Container
// healthchecks run it: the executor's image has no shell, curl or wget.
func newHealthcheckCommand() *cobra.Command {
	var addr, path string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Ask a running executor's /readyz; exit 0 if it is ready, 1 if not",
		Long: `healthcheck asks the executor serving --metrics-addr whether it is ready (GET
/readyz) and exits 0 when it answers 200, 1 otherwise, printing its answer. It
is what a container's healthcheck runs: the executor's image has no shell, curl
or wget. --addr defaults to TOOLEXEC_METRICS_ADDR, the variable the executor
itself reads; a wildcard host (0.0.0.0, ::) is asked on 127.0.0.1.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if addr == "" {
				addr = os.Getenv(envName("metrics-addr"))
			}
			if addr == "" {
				addr = os.Getenv(envName("health-addr"))
			}
			url, err := probeURL(addr, path)
			if err != nil {
				return usageError{err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return probe(ctx, url, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "the executor's --metrics-addr (default $TOOLEXEC_METRICS_ADDR)")
	cmd.Flags().StringVar(&path, "path", "/readyz", "what to ask: /readyz (ready to take calls) or /healthz (the process is up)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}

// probeURL returns the URL healthcheck asks: addr's host (127.0.0.1 for a
// wildcard) and port, and path.
func probeURL(addr, path string) (string, error) {
	if addr == "" {
		return "", errors.New("no address to ask: give --addr HOST:PORT or set TOOLEXEC_METRICS_ADDR")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w", addr, err)
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("--addr %q: needs the port the executor listens on", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("--path %q: must start with /", path)
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

// probe GETs url and returns nil if it answers 200; it prints the answer on
// out either way.
func probe(ctx context.Context, url string, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprint(out, string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s", url, resp.Status)
	}
	return nil
}
