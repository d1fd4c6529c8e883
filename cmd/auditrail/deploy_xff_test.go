//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/gateway"
)

// The attack on client_ip, for real: a role that trusts only the gateway's
// address (--trusted-proxies, as docker-compose.yml sets it) records the
// TCP peer of a client that forges X-Forwarded-For straight to it, and
// through the gateway (which replaces what the client claimed) the
// client's own address; only the trusted address's X-Forwarded-For is
// believed. Loopback addresses play the hosts: the gateway reaches the
// role from 127.0.0.1, the attackers connect from 127.0.0.2 and 127.0.0.3.
func TestDeployForwardedForOnlyFromGateway(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t, "--trusted-proxies", "127.0.0.1")
	g, err := gateway.New(gateway.Config{Upstreams: map[gateway.Role][]string{
		gateway.Query: {"http://" + p.http}, gateway.ToolRunner: {"http://" + p.http}, gateway.ControlPlane: {"http://" + p.http}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := newAPIClient(t, p.http)

	// createOrg creates an organization through base, connecting from
	// the address from, with an X-Forwarded-For, and returns its id.
	createOrg := func(base, from, xff string) string {
		t.Helper()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}}
		defer client.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+base+"/api/v1/orgs", bytes.NewReader([]byte(`{"name":"xff"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+boot)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("from %s: %v", from, err)
		}
		defer resp.Body.Close()
		var out struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("from %s: %d %v", from, resp.StatusCode, err)
		}
		return out.Data.ID
	}
	tests := []struct {
		name, via, from, xff, want string
	}{
		{"a client forging X-Forwarded-For straight to the role", p.http, "127.0.0.2", "203.0.113.66", "127.0.0.2"},
		{"a client forging X-Forwarded-For through the gateway", ln.Addr().String(), "127.0.0.3", "203.0.113.66", "127.0.0.3"},
		{"the trusted proxy's X-Forwarded-For", p.http, "127.0.0.1", "198.51.100.7", "198.51.100.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			org := createOrg(tt.via, tt.from, tt.xff)
			entries := auditEntries(t, c, boot, "/api/v1/orgs/"+org+"/audit_logs", 1)
			if ip := entries[0]["client_ip"]; ip != tt.want {
				t.Fatalf("client_ip %v, want %s", ip, tt.want)
			}
		})
	}
}
