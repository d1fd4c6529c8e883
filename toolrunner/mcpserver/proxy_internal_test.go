package mcpserver

import (
	"errors"
	"fmt"
	"testing"

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
