package witness_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

// memLog is a log in memory: its stored hashes, and its signing key.
type memLog struct {
	origin string
	hashes []sumtlog.Hash
	n      int64
	priv   tlog.PrivateKey
	pub    tlog.PublicKey
}

func newLog(t *testing.T) *memLog {
	t.Helper()
	priv, pub, err := tlog.GenerateKey("log.example", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &memLog{origin: tlog.Origin("auditrail", uuid.New(), tlog.KindAudit), priv: priv, pub: pub}
}

func (l *memLog) ReadHashes(indexes []int64) ([]sumtlog.Hash, error) {
	out := make([]sumtlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = l.hashes[x]
	}
	return out, nil
}

// grow appends n leaves whose data starts with tag.
func (l *memLog) grow(t *testing.T, n int, tag string) {
	t.Helper()
	for range n {
		h, err := sumtlog.StoredHashes(l.n, []byte(fmt.Sprintf("%s %d", tag, l.n)), l)
		if err != nil {
			t.Fatal(err)
		}
		l.hashes = append(l.hashes, h...)
		l.n++
	}
}

// checkpoint signs the log at its size.
func (l *memLog) checkpoint(t *testing.T) []byte {
	t.Helper()
	root, err := sumtlog.TreeHash(l.n, l)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := tlog.Sign(tlog.Checkpoint{Origin: l.origin, Size: l.n, Root: tlog.Hash(root), Time: time.Now()}, l.priv)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func (l *memLog) proof(t *testing.T, from int64) []tlog.Hash {
	t.Helper()
	if from == 0 || from == l.n {
		return nil
	}
	p, err := sumtlog.ProveTree(l.n, from, l)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]tlog.Hash, len(p))
	for i := range p {
		out[i] = tlog.Hash(p[i])
	}
	return out
}

func (l *memLog) vkey(t *testing.T) string {
	t.Helper()
	v, err := l.pub.VKey()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLitewitness submits checkpoints to litewitness (torchwood v0.6.1), a
// C2SP tlog-witness nobody here wrote: it cosigns a log that grows, answers
// 409 with the size it knows, refuses a forked log (422), a rolled-back
// one (its size beyond the checkpoint's), an unknown log (403), and is
// unavailable while down.
func TestLitewitness(t *testing.T) {
	lw := testenv.StartLitewitness(t, "witness.example/a")
	w, err := witness.New(lw.URL, lw.VKey)
	if err != nil {
		t.Fatal(err)
	}
	c := witness.NewClient(nil)
	ctx := context.Background()
	l := newLog(t)
	lw.AddLog(l.origin, l.vkey(t))

	l.grow(t, 3, "a")
	cp3 := l.checkpoint(t)
	cs, err := c.AddCheckpoint(ctx, w, 0, 3, nil, cp3)
	if err != nil {
		t.Fatalf("first checkpoint: %v\n%s", err, lw.Logs())
	}
	cosigned, err := tlog.WithCosignatures(cp3, []tlog.Cosignature{cs})
	if err != nil {
		t.Fatal(err)
	}
	if got, problems, _ := tlog.Cosignatures(cosigned, []tlog.WitnessKey{w.Key}); len(got) != 1 || len(problems) != 0 {
		t.Fatalf("the cosigned note does not verify with the witness's key: %q", cosigned)
	}
	if lw.Size(l.origin) != 3 {
		t.Fatalf("witness size %d, want 3", lw.Size(l.origin))
	}

	// The log grows; the request says the witness knows nothing: 409 3.
	l.grow(t, 300, "a")
	cp := l.checkpoint(t)
	_, err = c.AddCheckpoint(ctx, w, 0, l.n, nil, cp)
	var conflict *witness.ConflictError
	if !errors.As(err, &conflict) || conflict.Size != 3 {
		t.Fatalf("err %v, want a conflict at 3", err)
	}
	if _, err := c.AddCheckpoint(ctx, w, conflict.Size, l.n, l.proof(t, 3), cp); err != nil {
		t.Fatalf("with the proof from 3: %v", err)
	}

	t.Run("forked", func(t *testing.T) {
		// Another log of the same origin and key, from the same first 3
		// leaves: its checkpoint at a larger size is not consistent.
		fork := &memLog{origin: l.origin, priv: l.priv, pub: l.pub}
		fork.grow(t, 3, "a")
		fork.grow(t, 400, "b")
		_, err := c.AddCheckpoint(ctx, w, 303, fork.n, fork.proof(t, 303), fork.checkpoint(t))
		var se *witness.StatusError
		if !errors.As(err, &se) || se.Status != http.StatusUnprocessableEntity || !errors.Is(err, witness.ErrRefused) {
			t.Fatalf("err %v, want a 422 refusal", err)
		}
	})
	t.Run("rolled back", func(t *testing.T) {
		back := &memLog{origin: l.origin, priv: l.priv, pub: l.pub}
		back.grow(t, 100, "a")
		_, err := c.AddCheckpoint(ctx, w, 3, back.n, back.proof(t, 3), back.checkpoint(t))
		if !errors.Is(err, witness.ErrRefused) || !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("err %v, want a refusal naming a roll-back", err)
		}
	})
	t.Run("unknown log", func(t *testing.T) {
		other := newLog(t)
		other.grow(t, 2, "x")
		_, err := c.AddCheckpoint(ctx, w, 0, 2, nil, other.checkpoint(t))
		var se *witness.StatusError
		if !errors.As(err, &se) || se.Status != http.StatusForbidden {
			t.Fatalf("err %v, want 403", err)
		}
	})
	t.Run("another key", func(t *testing.T) {
		// A checkpoint of the log signed by a key the witness was not told.
		other := newLog(t)
		other.origin = l.origin
		other.grow(t, 303, "a")
		_, err := c.AddCheckpoint(ctx, w, 303, 303, nil, other.checkpoint(t))
		var se *witness.StatusError
		if !errors.As(err, &se) || se.Status != http.StatusForbidden {
			t.Fatalf("err %v, want 403", err)
		}
	})
	t.Run("down", func(t *testing.T) {
		lw.Stop()
		defer lw.Start()
		_, err := c.AddCheckpoint(ctx, w, 303, l.n, nil, cp)
		if !errors.Is(err, witness.ErrUnavailable) {
			t.Fatalf("err %v, want ErrUnavailable", err)
		}
	})
	if lw.Size(l.origin) != 303 {
		t.Fatalf("witness size %d, want 303 (no refused checkpoint moved it)", lw.Size(l.origin))
	}
}

// TestHostileWitness: whatever a witness answers is checked.
func TestHostileWitness(t *testing.T) {
	lw := newLog(t)
	lw.grow(t, 5, "a")
	cp := lw.checkpoint(t)
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a redirect was followed to %s", r.URL)
	}))
	defer victim.Close()
	var answer func(w http.ResponseWriter, r *http.Request)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(w, r) }))
	defer srv.Close()
	key := witnessKey(t)
	w, err := witness.New(srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	c := witness.NewClient(nil)
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		want   error
		words  string
	}{
		{"garbage 200", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello\n") }, witness.ErrBadAnswer, "not signature lines"},
		{"forged cosignature", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "— %s %s\n", strings.Split(key, "+")[0], forgedSig(key))
		}, witness.ErrBadAnswer, "does not verify"},
		{"huge", func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(strings.Repeat("a", witness.MaxAnswerBytes+10)))
		}, witness.ErrBadAnswer, "over"},
		{"negative 409", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, "-4\n")
		}, witness.ErrBadAnswer, "not a size"},
		{"409 beyond", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, "99999999999\n")
		}, witness.ErrRefused, "rolled back"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, victim.URL+"/add-checkpoint", http.StatusTemporaryRedirect)
		}, witness.ErrBadAnswer, "HTTP 307"},
		{"503", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, witness.ErrUnavailable, "503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer = tc.answer
			_, err := c.AddCheckpoint(context.Background(), w, 0, 5, nil, cp)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("err %v, want %v containing %q", err, tc.want, tc.words)
			}
		})
	}
}

func TestParse(t *testing.T) {
	key := witnessKey(t)
	for _, tc := range []struct{ in, want string }{
		{"https://w.example/witness," + key, ""},
		{"https://w.example/witness/ , " + key, ""},
		{"https://w.example", "not URL,VKEY"},
		{"ftp://w.example," + key, "scheme"},
		{"https://user:pw@w.example," + key, "credentials"},
		{"https://w.example/?a=b," + key, "query"},
		{"https://w.example,log+00000000+AAAA", "witness key"},
	} {
		w, err := witness.Parse(tc.in)
		if tc.want == "" {
			if err != nil || strings.HasSuffix(w.URL, "/") {
				t.Errorf("%q: %v %q", tc.in, err, w.URL)
			}
			continue
		}
		if !errors.Is(err, witness.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.in, err, tc.want)
		}
	}
}

// witnessKey is a valid vkey of a key nobody holds here.
func witnessKey(t *testing.T) string {
	t.Helper()
	pub := sha256.Sum256([]byte(t.Name()))
	k := tlog.WitnessKey{Name: "hostile.example/w", Pub: pub[:]}
	// The key hash, as C2SP computes it.
	h := sha256.Sum256(append(append([]byte(k.Name), '\n', 0x04), pub[:]...))
	k.Hash = uint32(h[0])<<24 | uint32(h[1])<<16 | uint32(h[2])<<8 | uint32(h[3])
	vkey := k.String()
	if _, err := tlog.ParseWitnessKey(vkey); err != nil {
		t.Fatal(err)
	}
	return vkey
}

// forgedSig is a cosignature's base64 with the key's hash and garbage.
func forgedSig(vkey string) string {
	k, _ := tlog.ParseWitnessKey(vkey)
	b := make([]byte, 4+8+64)
	b[0], b[1], b[2], b[3] = byte(k.Hash>>24), byte(k.Hash>>16), byte(k.Hash>>8), byte(k.Hash)
	b[11] = 1
	return b64(b)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
