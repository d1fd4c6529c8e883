package verifycmd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/tlogtest"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// verifyFixture is a log of n audit entries rendered as the list route
// renders them, two keys (the old one retired at t0), the keys file as
// GET /api/v1/audit_keys answers, and a directory for exports.
type verifyFixture struct {
	dir         string
	items       [][]byte
	leaves      []tlog.Hash
	origin      string
	key, oldKey tlog.PrivateKey
	keysFile    string
	t0          time.Time
}

func newVerifyFixture(t *testing.T, n int) *verifyFixture {
	t.Helper()
	org := uuid.New()
	f := &verifyFixture{dir: t.TempDir(), origin: tlog.Origin("audit.example.com", org, tlog.KindAudit), t0: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	g := synth.New(org, 2, 3)
	for i := range n {
		ts := f.t0.Add(-time.Hour + time.Duration(i)*time.Second)
		ev := g.Event(ts)
		e := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: ts}
		b, err := json.Marshal(apiitem.NewItem(&e))
		if err != nil {
			t.Fatal(err)
		}
		f.items = append(f.items, b)
	}
	var err error
	if f.leaves, err = tlogtest.Leaves(f.items); err != nil {
		t.Fatal(err)
	}
	key, pub, err := tlog.GenerateKey("audit.example.com", f.t0)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, oldPub, err := tlog.GenerateKey("audit.example.com-2025", f.t0.AddDate(-1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	f.key, f.oldKey = key, oldKey
	answer, _ := json.Marshal(map[string]any{"code": 200, "msg": "success", "data": []tlog.PublicKey{pub, oldPub.Retire(f.t0)}})
	f.keysFile = f.write(t, "keys.json", answer)
	return f
}

func (f *verifyFixture) write(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *verifyFixture) note(t *testing.T, size int64, at time.Time, key tlog.PrivateKey) []byte {
	t.Helper()
	n, err := tlogtest.Sign(f.leaves, size, f.origin, at, key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// export is the JSONL export of the whole log with its checkpoint line.
func (f *verifyFixture) export(t *testing.T) [][]byte {
	var l [][]byte
	for i, it := range f.items {
		l = append(l, tlogtest.Line(it, int64(i)))
	}
	return append(l, tlogtest.CheckpointLine(f.note(t, int64(len(f.items)), f.t0.Add(time.Hour), f.key)))
}

func jsonl(l [][]byte) []byte { return append(bytes.Join(l, []byte("\n")), '\n') }

// auditrail verify --export: each tamper of issue 24 on a JSONL export
// fails with the message that names it; the good export, and one signed by
// a rotated key inside its window, pass.
func TestVerifyExport(t *testing.T) {
	const n = 30
	f := newVerifyFixture(t, n)
	edit := func(i int, from, to string) func([][]byte) [][]byte {
		return func(l [][]byte) [][]byte {
			l[i] = bytes.Replace(l[i], []byte(from), []byte(to), 1)
			return l
		}
	}
	resign := func(size int64, at time.Time, key tlog.PrivateKey) func([][]byte) [][]byte {
		return func(l [][]byte) [][]byte {
			l[len(l)-1] = tlogtest.CheckpointLine(f.note(t, size, at, key))
			return l
		}
	}
	other, otherPub, _ := tlog.GenerateKey("audit.example.com", f.t0)
	logVKey, _ := otherPub.VKey()
	kept := f.write(t, "kept-20.note", f.note(t, 20, f.t0, f.key))
	keptAll := f.write(t, "kept-30.note", f.note(t, n, f.t0.Add(30*time.Minute), f.key))
	apiAnswer, _ := json.Marshal(map[string]any{"code": 200, "data": map[string]any{"note": string(f.note(t, n, f.t0.Add(time.Hour), f.key)), "size": n}})
	apart := f.write(t, "checkpoint.json", apiAnswer)
	// Witnesses: w1 cosigns (torchwood's signer), w2 does not.
	w1, w1key := cosigner(t, "witness.example/1")
	_, w2key := cosigner(t, "witness.example/2")
	cosigned := func(forge bool) func([][]byte) [][]byte {
		return func(l [][]byte) [][]byte {
			msg := f.note(t, n, f.t0.Add(time.Hour), f.key)
			text, _, _ := tlog.SplitNote(msg)
			signed, err := note.Sign(&note.Note{Text: string(text)}, w1)
			if err != nil {
				t.Fatal(err)
			}
			_, lines, _ := tlog.SplitNote(signed)
			line := lines[0]
			if forge {
				line = line[:len(line)-3] + "AA="
			}
			l[len(l)-1] = tlogtest.CheckpointLine(append(msg, line+"\n"...))
			return l
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func([][]byte) [][]byte
		flags []string
		says  string // "" : verifies
		usage bool
	}{
		{name: "good export", says: ""},
		{name: "deleted entry", edit: func(l [][]byte) [][]byte { return append(l[:12:12], l[13:]...) }, says: "leaf 12 missing: deleted"},
		{name: "two consecutive deleted entries", edit: func(l [][]byte) [][]byte { return append(l[:12:12], l[14:]...) }, says: "leaves 12..13 missing: 2 consecutive entries deleted"},
		{name: "altered field", edit: edit(17, `"action":"AUDIT_ACTION_`, `"action":"AUDIT_ACTION_X`), says: "root differs: the entries were reordered or altered"},
		{name: "swapped entries", edit: func(l [][]byte) [][]byte {
			l[3], l[4] = tlogtest.Line(f.items[4], 3), tlogtest.Line(f.items[3], 4)
			return l
		}, says: "root differs"},
		{name: "inserted entry", edit: func(l [][]byte) [][]byte {
			fake := bytes.Replace(l[9], []byte(`"display_name":"`), []byte(`"display_name":"Mallory `), 1)
			return append(l[:20:20], append([][]byte{fake}, l[20:]...)...)
		}, says: "2 entries claim leaf 9: line 10"},
		{name: "truncated tail", edit: func(l [][]byte) [][]byte { return append(l[:n-4:n-4], l[n]) }, says: "leaves 26..29 missing: 4 consecutive entries deleted (the tail of the log was truncated)"},
		{name: "unknown key", edit: resign(n, f.t0.Add(time.Hour), other), says: "checkpoint signed by unknown key " + other.KeyID()},
		{name: "rolled back", edit: resign(20, f.t0.Add(2*time.Hour), f.key), flags: []string{"--since-checkpoint", keptAll}, says: "rolled back: the kept checkpoint"},
		{name: "extends the kept checkpoint", flags: []string{"--since-checkpoint", kept}},
		{name: "old key inside its window", edit: resign(n, f.t0.Add(-time.Minute), f.oldKey)},
		{name: "old key outside its window", edit: resign(n, f.t0.Add(time.Minute), f.oldKey), says: "signed outside its key's validity"},
		{name: "line not JSON", edit: func(l [][]byte) [][]byte {
			return append(l[:5:5], append([][]byte{[]byte("<html>oops</html>")}, l[5:]...)...)
		}, says: "line 6 is not an entry of the export"},
		{name: "checkpoint apart (the checkpoint route's answer)", edit: func(l [][]byte) [][]byte { return l[:n] }, flags: []string{"--checkpoint", apart}},
		{name: "no checkpoint at all", edit: func(l [][]byte) [][]byte { return l[:n] }, says: "does not end with a checkpoint line: give --checkpoint", usage: true},
		{name: "witnessed", edit: cosigned(false), flags: []string{"--witness", w1key}},
		{name: "witnessed, quorum 1 of 2", edit: cosigned(false), flags: []string{"--witness", w1key, "--witness", w2key, "--witness-quorum", "1"}},
		{name: "no quorum", edit: cosigned(false), flags: []string{"--witness", w1key, "--witness", w2key}, says: "is cosigned by 1 of the witnesses given (witness.example/1), 2 required"},
		{name: "not witnessed", flags: []string{"--witness", w1key}, says: "is cosigned by 0 of the witnesses given (none)"},
		{name: "forged cosignature", edit: cosigned(true), flags: []string{"--witness", w1key}, says: "the cosignature of witness witness.example/1"},
		{name: "quorum above the witnesses", flags: []string{"--witness", w1key, "--witness-quorum", "2"}, says: "want 1 to 1", usage: true},
		{name: "quorum without witnesses", flags: []string{"--witness-quorum", "1"}, says: "without --witness", usage: true},
		{name: "a log key as a witness key", flags: []string{"--witness", logVKey}, says: "not a witness cosignature key", usage: true},
		{name: "a witness twice", flags: []string{"--witness", w1key, "--witness", w1key}, says: "given twice", usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := f.export(t)
			if tc.edit != nil {
				l = tc.edit(l)
			}
			path := f.write(t, "export.jsonl", jsonl(l))
			var out bytes.Buffer
			err := verifyCmd(context.Background(), append([]string{"--export", path, "--keys", f.keysFile}, tc.flags...), &out)
			var ue cli.UsageError
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("%v\n%s", err, out.String())
			case tc.says == "" && !strings.Contains(out.String(), "OK: "):
				t.Fatalf("no OK line:\n%s", out.String())
			case tc.says != "" && err == nil:
				t.Fatalf("verified:\n%s", out.String())
			case tc.says != "" && !strings.Contains(out.String()+err.Error(), tc.says):
				t.Fatalf("does not say %q: %v\n%s", tc.says, err, out.String())
			case err != nil && errors.As(err, &ue) != tc.usage:
				t.Fatalf("usage error %v, want %v: %v", !tc.usage, tc.usage, err)
			}
		})
	}
}

// A flag given on the command line wins over the environment, also over
// the twins of the flags of the other mode: --export with AUDITRAIL_URL
// (and AUDITRAIL_KEY, AUDITRAIL_ORG…) set verifies offline, --url with
// AUDITRAIL_EXPORT set online. Without either on the command line, the
// environment chooses; both there is a mistake that names them.
func TestVerifyFlagsWinOverEnvironment(t *testing.T) {
	f := newVerifyFixture(t, 10)
	good := f.write(t, "good.jsonl", jsonl(f.export(t)))
	org := uuid.NewString()
	onlineEnv := map[string]string{"AUDITRAIL_URL": "http://127.0.0.1:1", "AUDITRAIL_KEY": "ark_secret", "AUDITRAIL_ORG": org}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		says  string // in the output or the error
		usage bool
	}{
		{name: "--export with AUDITRAIL_URL, AUDITRAIL_KEY and AUDITRAIL_ORG set", env: onlineEnv,
			args: []string{"--export", good, "--keys", f.keysFile}, says: "OK: 10 entries (leaves 0..9)"},
		{name: "--export with every online variable set, some invalid", env: map[string]string{
			"AUDITRAIL_URL": "http://audit.example.com", "AUDITRAIL_KEY": "ark_secret", "AUDITRAIL_ORG": "nope", "AUDITRAIL_KIND": "nope",
			"AUDITRAIL_MAX_EXPORT_BYTES": "1", "AUDITRAIL_SAVE_CHECKPOINT": filepath.Join(f.dir, "saved.note")},
			args: []string{"--export", good, "--keys", f.keysFile}, says: "OK: 10 entries (leaves 0..9)"},
		{name: "AUDITRAIL_EXPORT and AUDITRAIL_KEYS alone", env: map[string]string{"AUDITRAIL_EXPORT": good, "AUDITRAIL_KEYS": f.keysFile},
			says: "OK: 10 entries (leaves 0..9)"},
		{name: "--url with AUDITRAIL_EXPORT and AUDITRAIL_CHECKPOINT set: online", env: map[string]string{"AUDITRAIL_EXPORT": good, "AUDITRAIL_CHECKPOINT": good},
			args: []string{"--url", "http://127.0.0.1:1", "--key", "k", "--org", org}, says: "--url needs --keys FILE", usage: true},
		{name: "AUDITRAIL_URL and AUDITRAIL_EXPORT both set", env: map[string]string{"AUDITRAIL_URL": "http://127.0.0.1:1", "AUDITRAIL_EXPORT": good},
			says: "AUDITRAIL_URL verifies online: AUDITRAIL_EXPORT is for an offline verification", usage: true},
		{name: "--url and --export both given", env: onlineEnv,
			args: []string{"--url", "http://127.0.0.1:1", "--export", good, "--keys", f.keysFile}, says: "--url verifies online: --export is for an offline verification", usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"URL", "KEY", "ORG", "KIND", "EXPORT", "CHECKPOINT", "KEYS", "SINCE_CHECKPOINT", "SAVE_CHECKPOINT", "MAX_EXPORT_BYTES", "PENDING_GRACE"} {
				t.Setenv("AUDITRAIL_"+name, "")
				os.Unsetenv("AUDITRAIL_" + name) // restored by t.Setenv's cleanup
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			err := verifyCmd(context.Background(), tc.args, &out)
			var ue cli.UsageError
			switch {
			case tc.usage && !errors.As(err, &ue):
				t.Fatalf("%v, want a usage error\n%s", err, out.String())
			case !tc.usage && err != nil:
				t.Fatalf("%v\n%s", err, out.String())
			}
			if got := out.String() + fmt.Sprint(err); !strings.Contains(got, tc.says) || strings.Contains(got, "ark_secret") {
				t.Fatalf("does not say %q (or shows the key):\n%s", tc.says, got)
			}
			if _, err := os.Stat(filepath.Join(f.dir, "saved.note")); err == nil {
				t.Fatal("an offline verification wrote AUDITRAIL_SAVE_CHECKPOINT")
			}
		})
	}
}

func TestMain(m *testing.M) { testenv.Main(m) }

// cosigner is a witness's signer made by torchwood (C2SP tlog-cosignature)
// and its vkey.
func cosigner(t *testing.T, name string) (*torchwood.CosignatureSigner, string) {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := torchwood.NewCosignatureSigner(name, k)
	if err != nil {
		t.Fatal(err)
	}
	return s, s.Verifier().String()
}
