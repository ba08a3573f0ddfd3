package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStatic: /static/ serves the stylesheet and the script, with their
// types, to anyone; not its listing, not the templates, nothing by a way
// around.
func TestStatic(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		path, contentType, holds string
	}{
		{"/static/console.css", "text/css; charset=utf-8", ":root"},
		{"/static/console.js", "text/javascript; charset=utf-8", "EventSource"},
	} {
		resp := f.send(home, httptest.NewRequest(http.MethodGet, tt.path, nil))
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tt.contentType || !strings.Contains(string(body), tt.holds) {
			t.Errorf("GET %s: %d %q, %d bytes", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tt.path)
		}
	}
	for _, path := range []string{
		"/static/",
		"/static",
		"/static/login.html",
		"/static/page.html",
		"/static/templates/login.html",
		"/static/static/console.css",
		"/static/assets/templates/page.html",
		"/static/..%2f",
		"/static/..%2flogin.html",
		"/static/..%2ftemplates%2flogin.html",
		"/static/%2e%2e%2ftemplates%2fpage.html",
		"/static/..%5ctemplates%5clogin.html",
		"/static/console.css%2f..%2fpage.html",
		"/static/console.css/",
		"/static/console.css%00",
		"/static/CONSOLE.CSS",
		"/static/%2e",
		// Dot segments: the mux redirects to the cleaned path, which is not found.
		"/static/.",
		"/static/./login.html",
		"/static/../static/page.html",
		"/static/x/../login.html",
	} {
		resp := f.follow(t, path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "{{") {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// follow gets path, following the console's redirects (a few at most).
func (f *fixture) follow(t *testing.T, path string) *http.Response {
	t.Helper()
	for range 3 {
		resp := f.send(home, httptest.NewRequest(http.MethodGet, path, nil))
		if resp.StatusCode < 300 || resp.StatusCode > 399 {
			return resp
		}
		path = resp.Header.Get("Location")
	}
	t.Fatalf("GET %s: too many redirects", path)
	return nil
}
