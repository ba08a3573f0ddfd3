package docs_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMCPStdio is the script command mcpstdio CONFIG OUT: it reads an
// mcpServers configuration (the JSON a desktop agent keeps), starts each
// server's command with its args as such an agent would, speaks MCP to it over
// stdio (initialize, tools/list, then a call of book), and writes to OUT one
// line per listed tool ("tool NAME") and one for the call ("call KIND TEXT").
func cmdMCPStdio(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mcpstdio CONFIG OUT")
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile(args[0])))
	dec.DisallowUnknownFields()
	ts.Check(dec.Decode(&cfg))
	if len(cfg.MCPServers) == 0 {
		ts.Fatalf("%s names no server", args[0])
	}
	var out strings.Builder
	for name, srv := range cfg.MCPServers {
		cmd := exec.Command(srv.Command, srv.Args...)
		cmd.Dir = ts.MkAbs(".")
		cmd.Env = state(ts).env
		for k, v := range srv.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		ts.Check(err)
		stdout, err := cmd.StdoutPipe()
		ts.Check(err)
		ts.Check(cmd.Start())
		replies := make(chan map[string]any, 8)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var m map[string]any
				if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
					replies <- m
				}
			}
			close(replies)
		}()
		send := func(msg map[string]any) {
			msg["jsonrpc"] = "2.0"
			b, err := json.Marshal(msg)
			ts.Check(err)
			_, err = stdin.Write(append(b, '\n'))
			ts.Check(err)
		}
		request := func(id int, method string, params any) map[string]any {
			send(map[string]any{"id": id, "method": method, "params": params})
			select {
			case r, ok := <-replies:
				if !ok {
					ts.Fatalf("%s ended before answering %s:\n%s", name, method, stderr.String())
				}
				if r["error"] != nil {
					ts.Fatalf("%s: %s: %v", name, method, r["error"])
				}
				res, _ := r["result"].(map[string]any)
				return res
			case <-time.After(30 * time.Second):
				ts.Fatalf("%s did not answer %s within 30 s:\n%s", name, method, stderr.String())
			}
			return nil
		}
		request(1, "initialize", map[string]any{
			"protocolVersion": "2025-06-18",
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "docs-test", "version": "0"},
		})
		send(map[string]any{"method": "notifications/initialized"})
		list := request(2, "tools/list", map[string]any{})
		tools, _ := list["tools"].([]any)
		var names []string
		for _, tl := range tools {
			if m, ok := tl.(map[string]any); ok {
				names = append(names, fmt.Sprint(m["name"]))
			}
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&out, "tool %s\n", n)
		}
		res := request(3, "tools/call", map[string]any{
			"name":      "book",
			"arguments": map[string]any{"flight": "LH400", "seats": 1, "request_id": "a"},
		})
		meta, _ := res["_meta"].(map[string]any)
		text := ""
		if c, ok := res["content"].([]any); ok && len(c) > 0 {
			if m, ok := c[0].(map[string]any); ok {
				text = fmt.Sprint(m["text"])
			}
		}
		fmt.Fprintf(&out, "call %v %s\n", meta["io.tesserix.toolexec/kind"], text)
		ts.Check(stdin.Close())
		done := make(chan error, 1)
		go func() {
			_, _ = io.Copy(io.Discard, stdout)
			done <- cmd.Wait()
		}()
		select {
		case err := <-done:
			if err != nil {
				ts.Fatalf("%s exited with %v when its stdin closed:\n%s", name, err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			ts.Fatalf("%s did not exit within 30 s of its stdin closing", name)
		}
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(out.String()), 0o600))
}
