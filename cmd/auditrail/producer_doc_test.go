//go:build e2e

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/testenv"
)

// goBlockRe finds a Go program the documentation marks as runnable.
var goBlockRe = regexp.MustCompile("(?s)<!-- doc-test-go ([a-z-]+) -->\n```go\n(.*?)```")

// The producer example of docs/architecture.md works as pasted: run with
// the producer credentials of dev, its event is acknowledged and listed in
// the organization's trail.
func TestProducerExampleAsPasted(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	m := goBlockRe.FindStringSubmatch(string(raw))
	if m == nil || m[1] != "producer" {
		t.Fatal("docs/architecture.md has no <!-- doc-test-go producer --> block")
	}
	// In a directory of this module (go run needs the module's
	// requirements), hidden from ./... by its leading dot.
	dir, err := os.MkdirTemp("../..", ".doctest-producer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(m[2]), 0o644); err != nil {
		t.Fatal(err)
	}
	p, boot := devWithKey(t)
	org := uuid.New()
	cmd := exec.Command("go", "run", "./"+filepath.Base(dir))
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "AUDITRAIL_NATS_URL=nats://"+p.nats, "PRODUCER_CREDS="+p.creds("producer"), "ORG="+org.String())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stored in AUDITRAIL_EVENTS at ") {
		t.Fatalf("the producer example: %v\n%s", err, out)
	}
	c := newAPIClient(t, p.http)
	var got string
	testenv.Eventually(t, 20*time.Second, func() string { return "the example's event listed: " + got }, func() bool {
		r := c.call("GET", fmt.Sprintf("/api/v1/orgs/%s/audit_logs", org), boot, nil)
		got = string(r.raw)
		return r.status == 200 && strings.Contains(got, `"resource_display":"invoice 42 approved"`) &&
			strings.Contains(got, `"source":"AUDIT_SOURCE_SDK"`)
	})
}
