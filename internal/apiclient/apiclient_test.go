package apiclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The admin CLI sends the user's key to the URL it was given and nowhere
// else: a redirect (to another host, to a subdomain, or to http) is an
// error naming where it pointed, and the target never sees the key.
func TestAdminCallFollowsNoRedirect(t *testing.T) {
	var leaked atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"code":200,"msg":"OK","data":{}}`))
	}))
	defer target.Close()
	for _, code := range []int{301, 302, 307, 308} {
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, code)
		}))
		_, err := New(front.URL, "ak_secret", 30*time.Second).Call(context.Background(), "GET", "/api/v1/orgs", nil)
		front.Close()
		if err == nil || !strings.Contains(err.Error(), "redirect to "+target.URL) {
			t.Fatalf("%d: %v, want an error naming the redirect", code, err)
		}
		if strings.Contains(err.Error(), "ak_secret") {
			t.Fatalf("%d: the error shows the key: %v", code, err)
		}
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the redirect target received the key %d times", n)
	}
}
