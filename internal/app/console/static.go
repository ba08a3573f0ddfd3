package console

import (
	_ "embed"
	"net/http"
	"strconv"
)

// The files the pages load, and nothing else: the templates are not served.
var (
	//go:embed assets/static/console.css
	consoleCSS []byte
	//go:embed assets/static/console.js
	consoleJS []byte
)

// staticFile is a file served under /static/.
type staticFile struct {
	contentType string
	body        []byte
}

// staticFiles are the files served under /static/, by name. Any other name,
// the directory itself included, is not found.
var staticFiles = map[string]staticFile{
	"console.css": {contentType: "text/css; charset=utf-8", body: consoleCSS},
	"console.js":  {contentType: "text/javascript; charset=utf-8", body: consoleJS},
}

// static serves GET /static/{name} from staticFiles.
func static(w http.ResponseWriter, r *http.Request) {
	f, ok := staticFiles[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.body)))
	_, _ = w.Write(f.body)
}
