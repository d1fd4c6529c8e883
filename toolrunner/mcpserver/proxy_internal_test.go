package mcpserver

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the proxy returns to its client is a JSON-RPC error with a real
// code: the upstream's own when it answered one, else an internal error.
func TestRPCErr(t *testing.T) {
	upstream := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "x"`}
	for _, tc := range []struct {
		name string
		err  error
		code int64
	}{
		{"plain", errors.New("connection reset"), jsonrpc.CodeInternalError},
		{"session gone", fmt.Errorf("calling: %w", mcp.ErrSessionMissing), jsonrpc.CodeInternalError},
		{"upstream JSON-RPC error", upstream, jsonrpc.CodeInvalidParams},
		{"wrapped upstream JSON-RPC error", fmt.Errorf("calling \"tools/call\": %w", upstream), jsonrpc.CodeInvalidParams},
	} {
		var je *jsonrpc.Error
		if got := rpcErr(tc.err); !errors.As(got, &je) || je.Code != tc.code {
			t.Errorf("%s: %v (%#v)", tc.name, got, je)
		}
	}
	if rpcErr(nil) != nil {
		t.Error("nil became an error")
	}
}

// A list_changed that arrives while the proxy closes starts nothing after
// close has begun waiting (an Add concurrent with Wait is a WaitGroup
// misuse, and the goroutine would outlive close).
func TestProxySpawnAfterClose(t *testing.T) {
	p := &proxy{tools: map[string]string{}}
	var ran atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // list_changed notifications, until close
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				p.spawn(func() { ran.Add(1) })
			}
		}
	}()
	time.Sleep(10 * time.Millisecond)
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	after := ran.Load()
	for range 1000 {
		p.spawn(func() { ran.Add(1) })
	}
	close(stop)
	<-done
	p.wg.Wait()
	if ran.Load() != after {
		t.Fatalf("%d goroutines started after close", ran.Load()-after)
	}
	if after == 0 {
		t.Fatal("nothing ran before close")
	}
}

// recorder is a RoundTripper that keeps the requests it is given.
type recorder struct{ reqs []*http.Request }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.reqs = append(r.reqs, req)
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: req}, nil
}

// The credential and the user go to the endpoint's scheme, host and port
// only, whatever reaches the transport.
func TestAuthTransportOrigin(t *testing.T) {
	for _, tc := range []struct {
		url  string
		auth bool
	}{
		{"http://api.example:8080/mcp/v1/x", true},
		{"http://API.example:8080/other", true},
		{"http://api.example:8081/mcp/v1/x", false},
		{"https://api.example:8080/mcp/v1/x", false},
		{"http://evil.example/mcp/v1/x", false},
	} {
		rec := &recorder{}
		tr := authTransport{base: rec, origin: "http://api.example:8080", key: "k", user: "u"}
		req, _ := http.NewRequest(http.MethodPost, tc.url, nil)
		req.Header.Set("Authorization", "Bearer set-by-someone-else")
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		got := rec.reqs[0].Header
		if tc.auth && (got.Get("Authorization") != "Bearer k" || got.Get(HeaderUserID) != "u") {
			t.Errorf("%s: %v", tc.url, got)
		}
		if !tc.auth && (got.Get("Authorization") != "" || got.Get(HeaderUserID) != "") {
			t.Errorf("%s: the credential went to another origin: %v", tc.url, got)
		}
	}
}
