//go:build e2e

package verifycmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/google/uuid"
)

// The binary: exit 0 on a good export, 1 with the report on stdout when
// something is wrong, 2 when a flag is missing; --export verifies offline
// whatever the environment says (the quick start exports AUDITRAIL_URL);
// --url without --keys is refused.
func TestVerifyBinary(t *testing.T) {
	f := newVerifyFixture(t, 10)
	l := f.export(t)
	good := f.write(t, "good.jsonl", jsonl(l))
	bad := f.write(t, "bad.jsonl", jsonl(append(l[:4:4], l[5:]...)))
	var env []string
	run := func(args ...string) (string, int) {
		cmd := exec.Command(testenv.Binaries(t, "github.com/auditrail/auditrail/cmd/auditrail"), append([]string{"verify"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := run("--export", good, "--keys", f.keysFile); code != 0 || !strings.Contains(out, "OK: 10 entries (leaves 0..9)") {
		t.Fatalf("good export: %d\n%s", code, out)
	}
	if out, code := run("--export", bad, "--keys", f.keysFile); code != 1 || !strings.Contains(out, "FAIL: leaf 4 missing: deleted") || !strings.Contains(out, "not verified") {
		t.Fatalf("deleted entry: %d\n%s", code, out)
	}
	if out, code := run("--export", good); code != 2 || !strings.Contains(out, "--keys is required") {
		t.Fatalf("no --keys: %d\n%s", code, out)
	}
	if out, code := run("--export", filepath.Join(f.dir, "nope.jsonl"), "--keys", f.keysFile); code != 1 || !strings.Contains(out, "no such file") {
		t.Fatalf("no export file: %d\n%s", code, out)
	}
	org := uuid.NewString()
	if out, code := run("--url", "http://127.0.0.1:1", "--key", "ark_secret", "--org", org); code != 2 ||
		!strings.Contains(out, "--keys FILE") || !strings.Contains(out, "--trust-server-keys") || strings.Contains(out, "ark_secret") {
		t.Fatalf("--url without --keys: %d\n%s", code, out)
	}
	if out, code := run("--url", "http://audit.example.com", "--key", "ark_secret", "--org", org, "--keys", f.keysFile); code != 2 || !strings.Contains(out, "https required") {
		t.Fatalf("http to a host that is not loopback: %d\n%s", code, out)
	}
	env = []string{"AUDITRAIL_URL=http://127.0.0.1:1", "AUDITRAIL_KEY=ark_secret", "AUDITRAIL_ORG=" + org}
	if out, code := run("--export", good, "--keys", f.keysFile); code != 0 || !strings.Contains(out, "OK: 10 entries (leaves 0..9)") {
		t.Fatalf("--export with AUDITRAIL_URL set: %d\n%s", code, out)
	}
}
