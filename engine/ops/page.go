package ops

import (
	"embed"
	"io/fs"
	"net/http"
)

// page is the status page: plain HTML, CSS and a script, no build step,
// served from the binary.
//
//go:embed page
var page embed.FS

// pageHandler serves / (index.html) and the page's files.
func pageHandler() http.Handler {
	sub, err := fs.Sub(page, "page")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/", "/index.html", "/app.js", "/style.css":
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
