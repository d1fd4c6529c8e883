package google

import (
	_ "embed"
	"net/http"
)

// pickerScript is the emulator's picker script (js/api.js): the subset of
// the Google Picker API a picker page uses, talking to the picker backend
// (picker.go) beside it.
//
//go:embed js/api.js
var pickerScript []byte

// pickerJS is GET /js/api.js, in place of https://apis.google.com/js/api.js.
// A page loads it with a <script src>: no CORS needed.
func (s *Server) pickerJS(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(pickerScript)
}
