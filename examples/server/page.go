package main

import (
	_ "embed"
	"net/http"
)

// pageHTML is the demo's single page: plain HTML and JavaScript, no build
// step.
//
//go:embed web/index.html
var pageHTML []byte

func servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(pageHTML)
}
