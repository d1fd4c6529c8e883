//go:build e2e

package main

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
)

// `auditrail healthcheck URL` exits 0 on a 200 only: a 503, a redirect (not
// followed), a closed port and a malformed URL fail, the first three with 1.
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(200)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			http.Error(w, `{"status":"waiting"}`, http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, c := range []struct {
		url  string
		code int
		says string
	}{
		{srv.URL + "/ok", 0, ""},
		{srv.URL + "/healthz", 1, "503"},
		{srv.URL + "/moved", 1, "302"},
		{closed.URL + "/healthz", 1, "refused"},
		{"ftp://x/healthz", 2, "not an http(s) URL"},
	} {
		out, err := exec.Command(binary(t), "healthcheck", c.url).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(string(out), c.says) {
			t.Errorf("healthcheck %s: exit %d %q, want %d and %q", c.url, code, out, c.code, c.says)
		}
	}
}
