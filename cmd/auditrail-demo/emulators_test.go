package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/auditrail/auditrail/demo"
)

// TestEmulatorsServeGraph: the demo's microsoft api_base_url
// (<emulators>/microsoft) is the Graph emulator with the demo user's
// sample mailbox.
func TestEmulatorsServeGraph(t *testing.T) {
	e, err := startEmulators(t.TempDir(), "127.0.0.1:0", "http://127.0.0.1/cb",
		map[string]demo.Client{"microsoft": {ID: "m", Secret: "s"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if n, err := e.Graph.MessageCount(demo.User, "inbox"); err != nil || n < 10 {
		t.Fatalf("demo inbox: %d messages, %v", n, err)
	}
	resp, err := http.Get(e.Base + "/microsoft/me/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &body); err != nil || resp.StatusCode != 401 || body.Error.Code != "InvalidAuthenticationToken" {
		t.Fatalf("unauthenticated Graph call: %d %s", resp.StatusCode, raw)
	}
}
