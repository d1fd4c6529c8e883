package tlog_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditrail/auditrail/internal/tlog"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func newKey(t *testing.T, name string, notBefore time.Time) (tlog.PrivateKey, tlog.PublicKey) {
	t.Helper()
	priv, pub, err := tlog.GenerateKey(name, notBefore)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func keySet(t *testing.T, keys ...tlog.PublicKey) tlog.KeySet {
	t.Helper()
	ks, err := tlog.NewKeySet(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestOrigin(t *testing.T) {
	org := uuid.MustParse("5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b")
	for kind, want := range map[tlog.Kind]string{
		tlog.KindAudit:      "audit.example.com/orgs/5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b/audit_logs",
		tlog.KindExecutions: "audit.example.com/orgs/5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b/tool_executions",
	} {
		got := tlog.Origin("audit.example.com/", org, kind)
		if got != want {
			t.Fatalf("Origin %q, want %q", got, want)
		}
		prefix, o, k, ok := tlog.ParseOrigin(got)
		if !ok || prefix != "audit.example.com" || o != org || k != kind {
			t.Fatalf("ParseOrigin(%q) = %q %v %v %v", got, prefix, o, k, ok)
		}
	}
	for _, bad := range []string{"x", "orgs/5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b/audit_logs", "p/orgs/nope/audit_logs", "p/org/5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b/audit_logs", "p/orgs/5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b/other"} {
		if _, _, _, ok := tlog.ParseOrigin(bad); ok {
			t.Errorf("ParseOrigin(%q) ok", bad)
		}
	}
}

// A signed checkpoint opens with its key; the body is the C2SP
// tlog-checkpoint text with the timestamp extension line.
func TestSignOpen(t *testing.T) {
	priv, pub := newKey(t, "audit.example.com", t0)
	cp := tlog.Checkpoint{Origin: "audit.example.com/orgs/5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b/audit_logs", Size: 8,
		Root: rfcRoots[7], Time: t0.Add(90*time.Minute + 1234567*time.Microsecond)}
	msg, err := tlog.Sign(cp, priv)
	if err != nil {
		t.Fatal(err)
	}
	wantBody := "audit.example.com/orgs/5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b/audit_logs\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\ntimestamp 2026-11-01T01:30:01.234Z\n\n— audit.example.com "
	if !strings.HasPrefix(string(msg), wantBody) {
		t.Fatalf("note\n%s\nwant it to start with\n%s", msg, wantBody)
	}
	got, key, err := tlog.Open(msg, keySet(t, pub))
	if err != nil {
		t.Fatal(err)
	}
	cp.Time = cp.Time.Truncate(time.Millisecond)
	if got != cp || key.KeyID != pub.KeyID {
		t.Fatalf("opened %+v by %s, want %+v by %s", got, key.KeyID, cp, pub.KeyID)
	}
	// The empty log has a checkpoint too.
	empty := tlog.Checkpoint{Origin: "o", Size: 0, Root: tlog.EmptyRoot, Time: t0}
	msg, err = tlog.Sign(empty, priv)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := tlog.Open(msg, keySet(t, pub)); err != nil || got != empty {
		t.Fatalf("empty: %+v %v", got, err)
	}
	for name, bad := range map[string]tlog.Checkpoint{
		"no time":          {Origin: "o", Size: 1},
		"negative size":    {Origin: "o", Size: -1, Time: t0},
		"origin with a +":  {Origin: "a+b", Time: t0},
		"origin with a sp": {Origin: "a b", Time: t0},
		"empty origin":     {Time: t0},
	} {
		if _, err := tlog.Sign(bad, priv); !errors.Is(err, tlog.ErrMalformedCheckpoint) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// signBody signs any text with priv's note signer: bodies Sign would not
// write.
func signBody(t *testing.T, priv tlog.PrivateKey, body string) []byte {
	t.Helper()
	s, err := note.NewSigner(string(priv.Marshal()))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: body}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// Open refuses each forgery and each malformed checkpoint with the error
// that says why.
func TestOpenRefuses(t *testing.T) {
	priv, pub := newKey(t, "audit.example.com", t0)
	other, otherPub := newKey(t, "audit.example.com", t0)
	oldPriv, oldPub := newKey(t, "audit.example.com-2025", t0.AddDate(-1, 0, 0))
	oldPub = oldPub.Retire(t0)
	ks := keySet(t, pub, oldPub)
	cp := tlog.Checkpoint{Origin: "audit.example.com/orgs/x/audit_logs", Size: 3, Root: rfcRoots[2], Time: t0.Add(time.Hour)}
	good, err := tlog.Sign(cp, priv)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(k tlog.PrivateKey, c tlog.Checkpoint) []byte {
		m, err := tlog.Sign(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	root := base64.StdEncoding.EncodeToString(rfcRoots[2][:])
	for _, tc := range []struct {
		name string
		msg  []byte
		want error
		says string
	}{
		{"unknown key", sign(other, cp), tlog.ErrUnknownKey, otherPub.KeyID},
		{"altered size", bytes.Replace(good, []byte("\n3\n"), []byte("\n4\n"), 1), tlog.ErrBadSignature, pub.KeyID},
		{"altered root", bytes.Replace(good, []byte(root[:10]), []byte("AAAAAAAAAA"), 1), tlog.ErrBadSignature, ""},
		{"old key after its retirement", sign(oldPriv, cp), tlog.ErrKeyNotValid, oldPub.KeyID},
		{"new key before its start", sign(priv, tlog.Checkpoint{Origin: cp.Origin, Size: 1, Root: rfcRoots[0], Time: t0.Add(-time.Second)}), tlog.ErrKeyNotValid, "valid from 2026-11-01T00:00:00.000Z"},
		{"old key at its retirement", sign(oldPriv, tlog.Checkpoint{Origin: cp.Origin, Size: 1, Root: rfcRoots[0], Time: t0}), tlog.ErrKeyNotValid, "until 2026-11-01T00:00:00.000Z"},
		{"not a note", []byte("hello\n"), tlog.ErrMalformedCheckpoint, ""},
		{"oversized", bytes.Repeat([]byte("a"), tlog.MaxCheckpointBytes+1), tlog.ErrTooLarge, ""},
		{"three lines", signBody(t, priv, "o\n3\n"+root+"\n"), tlog.ErrMalformedCheckpoint, "3 lines"},
		{"extra line", signBody(t, priv, "o\n3\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\nmore\n"), tlog.ErrMalformedCheckpoint, "line 5"},
		{"six lines", signBody(t, priv, "o\n3\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\nsealed_until 2026-11-01T00:00:00.000Z\nmore\n"), tlog.ErrMalformedCheckpoint, "6 lines"},
		{"sealed after the checkpoint", signBody(t, priv, "o\n3\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\nsealed_until 2026-11-01T01:00:00.001Z\n"), tlog.ErrMalformedCheckpoint, "after the checkpoint's time"},
		{"sealed not UTC ms", signBody(t, priv, "o\n3\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\nsealed_until 2026-11-01T00:00:00Z\n"), tlog.ErrMalformedCheckpoint, "sealed_until"},
		{"size with a sign", signBody(t, priv, "o\n+3\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, "size"},
		{"size with leading zero", signBody(t, priv, "o\n03\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, "size"},
		{"size in hex", signBody(t, priv, "o\n0x3\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, "size"},
		{"size overflows", signBody(t, priv, "o\n99999999999999999999\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, "size"},
		{"root of 31 bytes", signBody(t, priv, "o\n3\n"+root[:42]+"==\ntimestamp 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, "root"},
		{"root not base64", signBody(t, priv, "o\n3\n"+strings.Repeat("!", 44)+"\ntimestamp 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, "root"},
		{"no timestamp line", signBody(t, priv, "o\n3\n"+root+"\ntime 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, "timestamp"},
		{"timestamp not UTC ms", signBody(t, priv, "o\n3\n"+root+"\ntimestamp 2026-11-01T01:00:00Z\n"), tlog.ErrMalformedCheckpoint, "timestamp"},
		{"empty origin", signBody(t, priv, "\n3\n"+root+"\ntimestamp 2026-11-01T01:00:00.000Z\n"), tlog.ErrMalformedCheckpoint, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tlog.Open(tc.msg, ks)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%q does not say %q", err, tc.says)
			}
		})
	}
	// A sealed_until line round-trips.
	sealed := cp
	sealed.SealedUntil = t0.Add(59 * time.Minute)
	if got, _, err := tlog.Open(sign(priv, sealed), ks); err != nil || !got.SealedUntil.Equal(sealed.SealedUntil) {
		t.Fatalf("sealed checkpoint: %+v %v", got, err)
	}
	if _, err := tlog.Sign(tlog.Checkpoint{Origin: cp.Origin, Size: 3, Root: cp.Root, Time: t0, SealedUntil: t0.Add(time.Second)}, priv); !errors.Is(err, tlog.ErrMalformedCheckpoint) {
		t.Fatalf("signed a checkpoint sealed after its time: %v", err)
	}
	// Key rotation: the old key's checkpoints inside its window still open.
	before := tlog.Checkpoint{Origin: cp.Origin, Size: 1, Root: rfcRoots[0], Time: t0.Add(-time.Hour)}
	if _, k, err := tlog.Open(sign(oldPriv, before), ks); err != nil || k.KeyID != oldPub.KeyID {
		t.Fatalf("old key inside its window: %v", err)
	}
}

// Keys: the audit_keys fields, the key_id is the note key hash, and the
// keys file parses as the API answer or as the bare array.
func TestKeys(t *testing.T) {
	priv, pub := newKey(t, "audit.example.com", t0)
	if len(pub.KeyID) != 8 || pub.KeyID != priv.KeyID() || pub.Algorithm != "Ed25519" || pub.Name != "audit.example.com" || pub.NotAfter != nil {
		t.Fatalf("public key %+v", pub)
	}
	v, err := pub.Verifier()
	if err != nil || tlog.KeyID(v.KeyHash()) != pub.KeyID {
		t.Fatalf("verifier: %v", err)
	}
	_, pub2 := newKey(t, "audit.example.com-2", t0.Add(time.Hour))
	pub = pub.Retire(t0.Add(time.Hour))
	arr, err := json.Marshal([]tlog.PublicKey{pub, pub2})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(arr), `"not_before":"2026-11-01T00:00:00.000Z","not_after":"2026-11-01T01:00:00.000Z"`) || !strings.Contains(string(arr), `"not_after":null`) {
		t.Fatalf("keys JSON %s", arr)
	}
	for name, file := range map[string]string{
		"bare array": string(arr),
		"API answer": `{"code":200,"msg":"ok","data":` + string(arr) + `}`,
	} {
		ks, err := tlog.ParseKeySet([]byte(file))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ks.Keys()) != 2 || !ks.Keys()[0].NotAfter.Equal(*pub.NotAfter) {
			t.Fatalf("%s: %+v", name, ks.Keys())
		}
	}
	wrongID := strings.Replace(string(arr), pub.KeyID, "00000000", 1)
	for name, file := range map[string]string{
		"key_id not the key's":  wrongID,
		"error answer":          `{"code":401,"msg":"no","data":null}`,
		"no data":               `{"code":200}`,
		"not JSON":              `key`,
		"RSA":                   strings.Replace(string(arr), "Ed25519", "RSA", 1),
		"short key":             `[{"key_id":"x","algorithm":"Ed25519","public_key":"AAAA","name":"n","not_before":"2026-01-01T00:00:00Z"}]`,
		"bad time":              strings.Replace(string(arr), "2026-11-01T00:00:00.000Z", "yesterday", 1),
		"listed twice":          "[" + string(arr[1:len(arr)-1]) + "," + string(arr[1:len(arr)-1]) + "]",
		"name with space":       strings.Replace(string(arr), `"audit.example.com"`, `"audit example"`, 1),
		"ends before it starts": strings.Replace(string(arr), `"not_after":"2026-11-01T01:00:00.000Z"`, `"not_after":"2026-10-01T00:00:00.000Z"`, 1),
	} {
		if _, err := tlog.ParseKeySet([]byte(file)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := tlog.ParseKeySet(bytes.Repeat([]byte(" "), tlog.MaxKeysFileBytes+1)); !errors.Is(err, tlog.ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	for _, bad := range []string{"", "a b", "a+b", "tab\tname", "é"} {
		if _, _, err := tlog.GenerateKey(bad, t0); !errors.Is(err, tlog.ErrMalformedKey) {
			t.Errorf("GenerateKey(%q): %v", bad, err)
		}
	}
}

// The private key round-trips through its bytes (what the control plane
// seals) and is never printed: not by fmt verbs, slog, JSON, nor nested in
// a struct.
func TestPrivateKeyRedacted(t *testing.T) {
	priv, pub := newKey(t, "audit.example.com", t0)
	secret := string(priv.Marshal())
	if !strings.HasPrefix(secret, "PRIVATE+KEY+audit.example.com+") {
		t.Fatalf("unexpected key bytes format")
	}
	seed := strings.SplitN(secret, "+", 5)[4]
	back, err := tlog.ParsePrivateKey([]byte(secret))
	if err != nil || back.KeyID() != pub.KeyID {
		t.Fatalf("round trip: %v", err)
	}
	msg, err := tlog.Sign(tlog.Checkpoint{Origin: "o", Size: 0, Root: tlog.EmptyRoot, Time: t0}, back)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tlog.Open(msg, keySet(t, pub)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("key", "key", priv)
	j, _ := json.Marshal(priv)
	nested := struct {
		k tlog.PrivateKey
		K tlog.PrivateKey
	}{priv, priv}
	outs := []string{fmt.Sprint(priv), fmt.Sprintf("%v %+v %#v %s %q %x", priv, priv, priv, priv, priv, priv), logs.String(), string(j),
		fmt.Sprintf("%v %+v %#v", nested, nested, nested), fmt.Sprintf("%v", &priv)}
	for _, out := range outs {
		if strings.Contains(out, seed) || strings.Contains(out, seed[:12]) || strings.Contains(out, "PRIVATE") {
			t.Fatalf("key material printed: %s", out)
		}
	}
	if !strings.Contains(outs[0], pub.KeyID) || !strings.Contains(logs.String(), pub.KeyID) {
		t.Fatalf("the key_id should show: %s %s", outs[0], logs.String())
	}
	for _, bad := range []string{"", "PRIVATE+KEY+x", seed, "PRIVATE+KEY+a b+00000000+" + seed} {
		_, err := tlog.ParsePrivateKey([]byte(bad))
		if !errors.Is(err, tlog.ErrMalformedKey) || strings.Contains(err.Error(), seed[:12]) {
			t.Errorf("ParsePrivateKey(…): %v", err)
		}
	}
}

// FuzzParseKeySet: the keys file parser never panics, and what it accepts
// is a set of usable verifiers.
func FuzzParseKeySet(f *testing.F) {
	_, pub, _ := tlog.GenerateKey("audit.example.com", t0)
	arr, _ := json.Marshal([]tlog.PublicKey{pub})
	f.Add(arr)
	f.Add([]byte(`{"code":200,"msg":"ok","data":` + string(arr) + `}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"data":[{"key_id":"00000000"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ks, err := tlog.ParseKeySet(b)
		if err != nil {
			return
		}
		for _, k := range ks.Keys() {
			if _, err := k.Verifier(); err != nil {
				t.Fatalf("accepted a key that does not verify: %v", err)
			}
		}
	})
}

// FuzzOpen: Open never panics on any note, and what it accepts re-signs to
// the same body.
func FuzzOpen(f *testing.F) {
	priv, pub, _ := tlog.GenerateKey("audit.example.com", t0)
	ks, _ := tlog.NewKeySet(pub)
	msg, _ := tlog.Sign(tlog.Checkpoint{Origin: "o/orgs/x/audit_logs", Size: 5, Root: tlog.EmptyRoot, Time: t0.Add(time.Hour)}, priv)
	f.Add(msg)
	f.Add([]byte("o\n1\nAAAA\n\n— x AAAA\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, _, err := tlog.Open(b, ks)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(b, cp.Body()) {
			t.Fatalf("accepted %q whose body is not %q", b, cp.Body())
		}
	})
}
