package main

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/internal/app/console"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// TestConsoleOperatorsFile: with TOOLEXEC_CONSOLE_OPERATORS_FILE the console
// lets in each operator's own token, with what the file lets them see: an
// operator of globex is refused acme's records and the view across tenants.
// A bad file stops the executor with the file's error, and the console's
// flags without --console-addr are refused.
func TestConsoleOperatorsFile(t *testing.T) {
	const bobToken = "bob-token-0123456789abcdef01234567"
	line, err := console.OperatorLine("bob", bobToken, false, []string{"globex"})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "operators")
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (consoleFlags{operatorsFile: file}).check(); err == nil {
		t.Error("--console-operators-file without --console-addr was accepted")
	}
	addr := testenv.FreeAddr(t)
	t.Setenv("TOOLEXEC_CONSOLE_OPERATORS_FILE", file)
	startExecutor(t, "--demo", "--console-addr", addr)
	base := "http://" + addr
	if code, body := httpGet(t, base+"/?tenant=globex", "Authorization", "Bearer "+bobToken); code != http.StatusOK || !strings.Contains(body, "nothing of globex waits") {
		t.Fatalf("bob's globex: %d", code)
	}
	if code, body := httpGet(t, base+"/?tenant=acme", "Authorization", "Bearer "+bobToken); code != http.StatusOK || !strings.Contains(body, "you may not see tenant acme") {
		t.Fatalf("bob's acme: %d", code)
	}
	if code, _ := httpGet(t, base+"/all", "Authorization", "Bearer "+bobToken); code != http.StatusForbidden {
		t.Fatalf("bob's /all: %d", code)
	}
	resp, err := http.PostForm(base+"/login", url.Values{"token": {strings.TrimPrefix(strings.Fields(line)[1], "sha256:")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.RawQuery != "failed" {
		t.Fatalf("signing in with the file's digest landed on %s", resp.Request.URL)
	}
}

// TestConsoleBadOperatorsFile: a malformed file is refused at start.
func TestConsoleBadOperatorsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "operators")
	if err := os.WriteFile(file, []byte("bob plain-token-plain-token-plain-token admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := startConsole(consoleFlags{addr: "127.0.0.1:0", operatorsFile: file}, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "must be written hashed") || !strings.Contains(err.Error(), file+":1") {
		t.Fatalf("a plain token in the operators file: %v", err)
	}
}
