package hooksapi

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The generated code is what oapi-codegen makes of hooks.yaml today: a
// change to the contract without `go generate ./schemas/hooksapi` fails here.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "hooksapi.gen.go")
	cfg, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, bytes.Replace(cfg, []byte("output: hooksapi.gen.go"), []byte("output: "+out), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", cfgPath, "../openapi/hooks.yaml")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("hooksapi.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("hooksapi.gen.go is stale: run go generate ./schemas/hooksapi")
	}
}

func TestContractIsValidOpenAPI(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi/hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if doc.Info.Version != "1.0" {
		t.Fatalf("contract version %q, want 1.0", doc.Info.Version)
	}
	for _, p := range []string{"/access", "/pre", "/post", "/health"} {
		if doc.Paths.Find(p) == nil {
			t.Errorf("contract lacks %s", p)
		}
	}
}
