package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/ferret"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
	"github.com/auditrail/auditrail/toolrunner/toolkits/documentdb"
)

// MCPFigures measures an MCP tools/call of DocumentDbToolkit.CountDocuments
// (the SDK's client, streamable HTTP) against the same call through the tool
// runner's HTTP API, both on one server against FerretDB, the execution
// events published to NATS: p50 of interleaved calls.
func MCPFigures(ctx context.Context, progress io.Writer) ([]Figure, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, err := os.MkdirTemp("", "auditrail-bench-mcp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	db, err := ferret.Start(dir, quiet)
	if err != nil {
		return nil, err
	}
	defer db.Stop()
	if err := ferret.Seed(ctx, db.URI); err != nil {
		return nil, err
	}
	bn, err := startNATS(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer bn.close()
	pub, err := producers.New(bn.nc, producers.DefaultConfig(), quiet)
	if err != nil {
		return nil, err
	}
	cfg := documentdb.DefaultConfig()
	cfg.Egress, cfg.Log = egress.AllowLoopback(), quiet
	docdb := documentdb.New(cfg)
	defer docdb.Close(context.WithoutCancel(ctx))
	reg := toolrunner.NewRegistry()
	if err := reg.Register(docdb.Tools()...); err != nil {
		return nil, err
	}
	runner := toolrunner.New(toolrunner.DefaultConfig(), reg, hookproxy.New(hookproxy.DefaultConfig(), quiet), noSources{}, dbSecret(db.URI), noSources{}, pub, quiet)

	app := httpapi.NewApp(quiet)
	srv := toolrunner.NewServer(runner, mcpAccess{}, httpx.TrustedProxies{})
	srv.Register(app)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, err := mcpserver.NewHandler(hctx, mcpserver.DefaultConfig(), runner, srv, quiet)
	if err != nil {
		return nil, err
	}
	h.Register(app)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = app.Listener(l) }()
	defer func() { _ = app.ShutdownWithTimeout(5 * time.Second) }()
	org, project := uuid.New(), uuid.New()
	base := "http://" + l.Addr().String()
	path := "/orgs/" + org.String() + "/projects/" + project.String()

	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	input := map[string]any{"database_name": "shop", "collection_name": "orders", "filter_dict": `{"status":"paid"}`}
	body, _ := json.Marshal(map[string]any{"tool_name": "DocumentDbToolkit.CountDocuments", "input": input})
	viaHTTP := func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1"+path+"/tools/execute", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer bench")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var env struct {
			Data toolrunner.Result `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			return err
		}
		if resp.StatusCode != 200 || !env.Data.Success {
			return fmt.Errorf("HTTP execute: %d %+v", resp.StatusCode, env.Data.Error)
		}
		return nil
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "auditrail-bench", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp/v1" + path, HTTPClient: &http.Client{Transport: mcpBearer{base: transport}}}, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp initialize: %w", err)
	}
	defer cs.Close()
	viaMCP := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "DocumentDbToolkit.CountDocuments", Arguments: input})
		if err != nil {
			return err
		}
		if res.IsError {
			return errors.New("MCP tools/call: tool error")
		}
		return nil
	}

	say("DocumentDbToolkit.CountDocuments: MCP tools/call against POST …/tools/execute, interleaved")
	d, err := interleave(1000, 100, viaHTTP, viaMCP)
	if err != nil {
		return nil, err
	}
	hl, ml := summarize(d[0]), summarize(d[1])
	say("  HTTP p50 %s p99 %s, MCP p50 %s p99 %s", hl.P50, hl.P99, ml.P50, ml.P99)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	return []Figure{{Name: "MCP tools/call CountDocuments p50 (µs)", Value: us(ml.P50), Unit: "µs", Reference: us(hl.P50),
		RefName: "the same call via POST tools/execute", Goal: 1.2, Lower: true}}, nil
}

// mcpAccess lets the key "bench" use every project's tools as user bench.
type mcpAccess struct{}

func (mcpAccess) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	if cred != "bench" {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{ID: "bench", Type: "API_KEY", UserID: "bench"}, nil
}

func (mcpAccess) AuthorizeTools(context.Context, auth.Principal, uuid.UUID, uuid.UUID) error {
	return nil
}

func (mcpAccess) DisplayName(auth.Principal, uuid.UUID) string { return "bench" }

// dbSecret gives every project the connection string of the benchmark's
// database.
type dbSecret string

func (s dbSecret) SecretValue(_, _, name string) (string, error) {
	if name != documentdb.SecretName {
		return "", fmt.Errorf("no secret %s", name)
	}
	return string(s), nil
}

type mcpBearer struct{ base http.RoundTripper }

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer bench")
	return b.base.RoundTrip(r)
}
