package mcptool

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestReadLine(t *testing.T) {
	tests := []struct {
		name  string
		input string
		limit int
		want  []string
	}{
		{"lines", "one\ntwo\n", 10, []string{"one", "two"}},
		{"no final newline", "one\ntwo", 10, []string{"one", "two"}},
		{"CRLF", "one\r\ntwo\r\n", 10, []string{"one", "two"}},
		{"empty line", "\nx\n", 10, []string{"", "x"}},
		{"exactly the limit", "12345\n", 5, []string{"12345"}},
		{"cut", "1234567890\nnext\n", 5, []string{"12345 …(cut)", "next"}},
		{"longer than the reader's buffer", strings.Repeat("x", 5000) + "\nnext\n", 100, []string{strings.Repeat("x", 100) + " …(cut)", "next"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.input), 16)
			var got []string
			for {
				line, err := readLine(br, tt.limit)
				if line != "" || err == nil {
					got = append(got, line)
				}
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatal(err)
					}
					break
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("lines %q; want %q", got, tt.want)
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("PATH", "/usr/bin")
	t.Setenv("HOME", "/home/x")
	t.Setenv("TOOLEXEC_NATS_PASSWORD", "hunter2")
	env := environment(map[string]string{"MEMORY_FILE_PATH": "/tmp/m.json", "HOME": "/srv"})
	has := map[string]bool{}
	for _, kv := range env {
		has[kv] = true
		if strings.Contains(kv, "hunter2") {
			t.Errorf("the child inherits %s", kv)
		}
	}
	for _, want := range []string{"PATH=/usr/bin", "HOME=/srv", "MEMORY_FILE_PATH=/tmp/m.json"} {
		if !has[want] {
			t.Errorf("environment %q lacks %s", env, want)
		}
	}
}
