package arcadehook

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const description = "../../hookproxy/testdata/arcade/logic_extensions.yaml"

// The generated code is what oapi-codegen makes of the description today:
// a change to it without `go generate ./internal/arcadehook` fails here.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "arcadehook.gen.go")
	cfg, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, bytes.Replace(cfg, []byte("output: arcadehook.gen.go"), []byte("output: "+out), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", cfgPath, description)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("arcadehook.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("arcadehook.gen.go is stale: run go generate ./internal/arcadehook")
	}
}

// The description names its origin and version, is valid OpenAPI, and has
// every operation of the public contract. (The copy embedded in the
// generated code, which the server validates with, is the file's:
// TestGeneratedCodeIsCurrent.)
func TestDescriptionOriginAndOperations(t *testing.T) {
	raw, err := os.ReadFile(description)
	if err != nil {
		t.Fatal(err)
	}
	head := string(raw[:min(len(raw), 800)])
	for _, want := range []string{"ArcadeAI/schemas", "logic_extensions/http/1.0/schema.yaml", "1.1.1-beta"} {
		if !strings.Contains(head, want) {
			t.Errorf("header does not name %q", want)
		}
	}
	c, err := LoadContract(description)
	if err != nil {
		t.Fatal(err)
	}
	if c.Doc.Info.Version != "1.1.1-beta" {
		t.Fatalf("version %q", c.Doc.Info.Version)
	}
	for _, op := range []struct{ method, path, id string }{
		{"POST", "/access", "accessHook"}, {"POST", "/pre", "preHook"}, {"POST", "/post", "postHook"}, {"GET", "/health", "healthCheck"},
	} {
		item := c.Doc.Paths.Find(op.path)
		if item == nil || item.GetOperation(op.method) == nil || item.GetOperation(op.method).OperationID != op.id {
			t.Errorf("%s %s (%s) missing", op.method, op.path, op.id)
			continue
		}
		o := item.GetOperation(op.method)
		bearer := o.Security != nil && len(*o.Security) == 1 && (*o.Security)[0]["bearerAuth"] != nil
		if bearer != (op.path != "/health") {
			t.Errorf("%s: bearer required %v", op.path, bearer)
		}
	}
}
