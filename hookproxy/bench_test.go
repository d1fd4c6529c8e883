package hookproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

func BenchmarkPrePost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, `{"code":"OK"}`)
	}))
	defer srv.Close()
	p := New(testConfig(), nil)
	h := hook("h", srv.URL, FailClosed)
	h.Points[Pre] = PointConfig{Path: "/pre", Timeout: 5 * time.Second, FailureMode: FailClosed}
	h.Points[Post] = PointConfig{Path: "/post", Timeout: 5 * time.Second, FailureMode: FailClosed}
	hooks := []Hook{h}
	req := preReq()
	post := hooksapi.PostRequest{ExecutionId: "e", Output: []any{"a", "b"}, Success: true}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p.Pre(ctx, hooks, req)
		p.Post(ctx, hooks, post)
	}
}

func BenchmarkBarePair(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, `{"code":"OK"}`)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := []byte(`{"execution_id":"e","tool":{"name":"T","toolkit":"K","version":"1"},"inputs":{"a":1},"context":{}}`)
	post := func(path string) {
		resp, err := client.Post(srv.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	b.ReportAllocs()
	for b.Loop() {
		post("/pre")
		post("/post")
	}
}

func BenchmarkBreakerOpenDecision(b *testing.B) {
	p := New(testConfig(), nil)
	defer p.Close()
	h := hook("dead", "http://127.0.0.1:1", FailClosed)
	h.MaxAttempts, h.ConsecutiveFailures = 1, 1
	ctx := context.Background()
	req := preReq()
	p.Pre(ctx, []Hook{h}, req)
	hooks := []Hook{h}
	b.ReportAllocs()
	for b.Loop() {
		if r := p.Pre(ctx, hooks, req); r.Allowed || r.Calls[0].Failure != FailureBreakerOpen {
			b.Fatal("breaker not open")
		}
	}
}

// The cost of a pre request in each contract's shape (the arcade one is
// converted per hook): the ratio is what choosing "arcade" costs.
func BenchmarkEncodePre(b *testing.B) {
	user, ptype, on := "alice", "oauth2", true
	scopes := []string{"docs.read", "drive.file"}
	meta := map[string]any{"organization_id": "o", "project_id": "p"}
	secrets := map[string]bool{"API_KEY": true, "DB_URL": true}
	auth := map[string]hooksapi.AuthorizationInfo{"google": {ProviderType: &ptype, Connected: &on, Scopes: &scopes}}
	req := hooksapi.PreRequest{ExecutionId: "e", Tool: hooksapi.Tool{Name: "T", Toolkit: "K", Version: "1"}, Inputs: map[string]any{"a": 1, "b": "x"},
		Context: hooksapi.Context{UserId: &user, Metadata: &meta, Secrets: &secrets, Authorization: &auth}}
	for _, c := range []Contract{ContractAuditrail, ContractArcade} {
		h := Hook{Contract: c}
		b.Run(string(c), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := preBody(h, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
