package datadir

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/cli"
)

// One directory, one process: a second lock fails naming the holder; the
// released lock can be taken again.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); err == nil || !strings.Contains(err.Error(), "is in use by process "+strings.TrimSpace(pid())) {
		t.Fatalf("second lock: %v", err)
	}
	release()
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}

func pid() string { return strconv.Itoa(os.Getpid()) }

// Keys: given keys are parsed and checked; without them a role needs the
// flag, dev keeps a generated key in DATA and reads it again; a corrupt
// file is an error, not a new key.
func TestKeys(t *testing.T) {
	k16 := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	k32 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 32))
	for _, tc := range []struct {
		name, given string
		exact, n    int
		usage       string
	}{
		{"two keys", k16 + "," + k16, 0, 2, ""},
		{"exact length", k32, 32, 1, ""},
		{"too short", base64.StdEncoding.EncodeToString([]byte("short")), 0, 0, "at least 16 bytes"},
		{"wrong exact length", k16, 32, 0, "32 bytes"},
		{"not base64", "!!", 0, 0, "base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := Keys("x-keys", tc.given, "", "", tc.exact)
			if tc.usage != "" {
				if _, usage := errors.AsType[cli.UsageError](err); !usage || !strings.Contains(err.Error(), tc.usage) {
					t.Fatalf("Keys = %v, want a usage error naming %q", err, tc.usage)
				}
				return
			}
			if err != nil || len(keys) != tc.n {
				t.Fatalf("Keys = %d keys, %v", len(keys), err)
			}
		})
	}
	if _, err := Keys("x-keys", "", "", "", 0); err == nil || !strings.Contains(err.Error(), "--x-keys is required") {
		t.Fatalf("a role without the flag: %v", err)
	}
	dir := t.TempDir()
	first, err := Keys("x-keys", "", dir, SecretsKeyFile, 32)
	if err != nil || len(first) != 1 || len(first[0]) != 32 {
		t.Fatalf("generated: %v, %v", first, err)
	}
	second, err := Keys("x-keys", "", dir, SecretsKeyFile, 32)
	if err != nil || !bytes.Equal(first[0], second[0]) {
		t.Fatalf("kept key not read again: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SecretsKeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Keys("x-keys", "", dir, SecretsKeyFile, 32); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt file: %v", err)
	}
}

// The bootstrap key: a given one is hashed (16 characters at least); dev
// makes one, prints it, keeps it and its hash, and says so at the next
// start; a hash without its key is kept, printed as such.
func TestBootstrapKey(t *testing.T) {
	if _, _, err := BootstrapKey("short", "", nil); err == nil {
		t.Fatal("a short key was accepted")
	}
	h, known, err := BootstrapKey("a-bootstrap-key-given", "", nil)
	if err != nil || h != auth.HashKey("a-bootstrap-key-given") || known != "" {
		t.Fatalf("given: %q %q %v", h, known, err)
	}
	dir := t.TempDir()
	var out bytes.Buffer
	h, key, err := BootstrapKey("", dir, &out)
	if err != nil || !strings.HasPrefix(key, "ark_") || h != auth.HashKey(key) || !strings.Contains(out.String(), key) {
		t.Fatalf("generated: %q %q %v (%s)", h, key, err, out.String())
	}
	out.Reset()
	h2, key2, err := BootstrapKey("", dir, &out)
	if err != nil || h2 != h || key2 != key || strings.Contains(out.String(), key) {
		t.Fatalf("kept: %q %q %v (%s)", h2, key2, err, out.String())
	}
	if err := os.Remove(filepath.Join(dir, BootstrapKeyFile)); err != nil {
		t.Fatal(err)
	}
	h3, key3, err := BootstrapKey("", dir, &out)
	if err != nil || h3 != h || key3 != "" {
		t.Fatalf("hash only: %q %q %v", h3, key3, err)
	}
}
