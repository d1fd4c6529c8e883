package mcpserver

import (
	"errors"
	"fmt"
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
