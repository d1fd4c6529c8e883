package tlog_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditrail/auditrail/internal/tlog"
)

// witness is a cosigner made by torchwood (an implementation of C2SP
// tlog-cosignature that nobody here wrote).
type witness struct {
	s   *torchwood.CosignatureSigner
	key tlog.WitnessKey
}

func newWitness(t *testing.T, name string) witness {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	k, err := tlog.ParseWitnessKey(s.Verifier().String())
	if err != nil {
		t.Fatalf("torchwood's vkey %q: %v", s.Verifier().String(), err)
	}
	if k.String() != s.Verifier().String() {
		t.Fatalf("vkey round trip: %q, torchwood %q", k.String(), s.Verifier().String())
	}
	return witness{s: s, key: k}
}

// cosign returns the witness's signature line over the note's text.
func (w witness) cosign(t *testing.T, msg []byte) tlog.Cosignature {
	t.Helper()
	text, _, err := tlog.SplitNote(msg)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := note.Sign(&note.Note{Text: string(text)}, w.s)
	if err != nil {
		t.Fatal(err)
	}
	_, lines, err := tlog.SplitNote(signed)
	if err != nil {
		t.Fatal(err)
	}
	return tlog.Cosignature{Witness: w.key, Line: lines[0] + "\n"}
}

func signedCheckpoint(t *testing.T) ([]byte, tlog.PublicKey) {
	t.Helper()
	priv, pub := newKey(t, "log.example", t0)
	msg, err := tlog.Sign(tlog.Checkpoint{Origin: tlog.Origin("auditrail", uuid.New(), tlog.KindAudit), Size: 7, Time: t0.Add(time.Minute)}, priv)
	if err != nil {
		t.Fatal(err)
	}
	return msg, pub
}

func TestCosignaturesOfTorchwoodWitnesses(t *testing.T) {
	msg, pub := signedCheckpoint(t)
	a, b, c := newWitness(t, "witness.example/a"), newWitness(t, "witness.example/b"), newWitness(t, "witness.example/c")
	cosigned, err := tlog.WithCosignatures(msg, []tlog.Cosignature{a.cosign(t, msg), b.cosign(t, msg)})
	if err != nil {
		t.Fatal(err)
	}
	// The log's own signature still verifies with the cosignatures beside it.
	if _, _, err := tlog.Open(cosigned, keySet(t, pub)); err != nil {
		t.Fatalf("Open of the cosigned note: %v", err)
	}
	got, problems, err := tlog.Cosignatures(cosigned, []tlog.WitnessKey{a.key, b.key, c.key})
	if err != nil || len(problems) != 0 {
		t.Fatalf("Cosignatures: %v %v", problems, err)
	}
	if len(got) != 2 || got[0].Witness.Name != a.key.Name || got[1].Witness.Name != b.key.Name {
		t.Fatalf("cosignatures %+v, want a and b", got)
	}
	if d := time.Since(got[0].Time); d < 0 || d > time.Minute {
		t.Fatalf("cosignature time %v", got[0].Time)
	}
	// Adding a's again keeps one line of a.
	again, err := tlog.WithCosignatures(cosigned, []tlog.Cosignature{a.cosign(t, msg)})
	if err != nil || !bytes.Equal(again, cosigned) {
		t.Fatalf("a second cosignature of a was added: %q %v", again, err)
	}
	// The note sent to a witness carries the log's signature only.
	own, err := tlog.OwnSignatures(cosigned, pub)
	if err != nil || !bytes.Equal(own, msg) {
		t.Fatalf("OwnSignatures: %q %v, want %q", own, err, msg)
	}
}

func TestForgedCosignatures(t *testing.T) {
	msg, _ := signedCheckpoint(t)
	a, other := newWitness(t, "witness.example/a"), newWitness(t, "witness.example/a")
	good := a.cosign(t, msg)
	// A line named as a's key but signed by another key of that name and
	// the key hash of a.
	forged := other.cosign(t, msg)
	_, fl, _ := strings.Cut(strings.TrimSpace(forged.Line), " ")
	_, b64, _ := strings.Cut(fl, " ")
	_, gl, _ := strings.Cut(strings.TrimSpace(good.Line), " ")
	_, goodB64, _ := strings.Cut(gl, " ")
	forgedLine := "— witness.example/a " + goodB64[:6] + b64[6:] + "\n"
	// The text of another checkpoint, cosigned, then moved onto this one.
	other2, _ := signedCheckpoint(t)
	moved := a.cosign(t, other2)
	for name, line := range map[string]string{"another key": forgedLine, "another checkpoint": moved.Line} {
		t.Run(name, func(t *testing.T) {
			bad := append(bytes.Clone(msg), line...)
			got, problems, err := tlog.Cosignatures(bad, []tlog.WitnessKey{a.key})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 0 || len(problems) != 1 || !errors.Is(problems[0], tlog.ErrBadSignature) {
				t.Fatalf("got %v, problems %v: want the forged line refused", got, problems)
			}
			if !strings.Contains(problems[0].Error(), "witness.example/a") {
				t.Fatalf("problem %q does not name the witness", problems[0])
			}
		})
	}
}

func TestParseWitnessKey(t *testing.T) {
	w := newWitness(t, "witness.example/a")
	vkey := w.key.String()
	name, rest, _ := strings.Cut(vkey, "+")
	hash, b64, _ := strings.Cut(rest, "+")
	_, logKey := signedCheckpoint(t)
	logVKey, err := note.NewEd25519VerifierKey(logKey.Name, mustB64(t, logKey.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, vkey, want string }{
		{"ok", vkey, ""},
		{"Ed25519 note key", logVKey, "algorithm 0x01"},
		{"wrong hash", name + "+00000000+" + b64, "does not match"},
		{"short hash", name + "+" + hash[:7] + "+" + b64, "8 hex digits"},
		{"space in name", "a b+" + hash + "+" + b64, "name"},
		{"no key", name + "+" + hash, "name+hash+key"},
		{"truncated key", name + "+" + hash + "+" + b64[:20], "base64"},
		{"empty", "", "name+hash+key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlog.ParseWitnessKey(tc.vkey)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, tlog.ErrMalformedKey) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrMalformedKey containing %q", err, tc.want)
			}
		})
	}
}

func FuzzCosignatures(f *testing.F) {
	msg, _ := signedCheckpoint(&testing.T{})
	f.Add(msg)
	f.Add([]byte("a\n\n— x AAAA\n"))
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, _ := torchwood.NewCosignatureSigner("w", priv)
	k, _ := tlog.ParseWitnessKey(s.Verifier().String())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, problems, err := tlog.Cosignatures(b, []tlog.WitnessKey{k})
		if err != nil && (len(got) > 0 || len(problems) > 0) {
			t.Fatal("results with an error")
		}
		if err == nil {
			if _, err := tlog.WithCosignatures(b, got); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
