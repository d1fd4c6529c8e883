package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/testenv"
)

type edKey struct {
	kid  string
	priv ed25519.PrivateKey
}

func newEdKey(t *testing.T, kid string) edKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return edKey{kid, priv}
}

func (k edKey) token(t *testing.T) string {
	return sign(t, jwt.SigningMethodEdDSA, k.kid, k.priv, jwt.MapClaims{"sub": "user-" + k.kid, "exp": time.Now().Add(time.Hour).Unix()})
}

// writeJWKS writes the public keys to path as a JWKS, atomically (as a
// deployment tool would: a new file renamed over the old one).
func writeJWKS(t *testing.T, path string, keys ...edKey) {
	t.Helper()
	var set []map[string]string
	for _, k := range keys {
		set = append(set, map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": k.kid,
			"x": base64.RawURLEncoding.EncodeToString(k.priv.Public().(ed25519.PublicKey))})
	}
	b, _ := json.Marshal(map[string]any{"keys": set})
	writeFile(t, path, b)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A key removed from the JWKS file stops verifying at the next reload,
// without a restart; the others keep verifying; a file that cannot be
// used keeps the keys in use.
func TestJWKSReload(t *testing.T) {
	a, b, c := newEdKey(t, "a"), newEdKey(t, "b"), newEdKey(t, "c")
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, a, b)
	v, err := LoadJWKSFile(path, JWTConfig{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		file      func()
		changed   bool
		reloadErr bool
		kids      []string
	}{
		{"unchanged", func() {}, false, false, []string{"a", "b"}},
		{"b removed", func() { writeJWKS(t, path, a) }, true, false, []string{"a"}},
		{"broken file", func() { writeFile(t, path, []byte(`{"keys": [`)) }, false, true, []string{"a"}},
		{"no keys", func() { writeFile(t, path, []byte(`{"keys": []}`)) }, false, true, []string{"a"}},
		{"file gone", func() { _ = os.Remove(path) }, false, true, []string{"a"}},
		{"c added", func() { writeJWKS(t, path, a, c) }, true, false, []string{"a", "c"}},
	}
	for _, s := range steps {
		s.file()
		changed, err := v.Reload()
		if changed != s.changed || (err != nil) != s.reloadErr || err != nil && !errors.Is(err, ErrInvalidJWKS) {
			t.Fatalf("%s: Reload = %v, %v; want changed %v, error %v", s.name, changed, err, s.changed, s.reloadErr)
		}
		if !reflect.DeepEqual(v.Kids(), s.kids) {
			t.Fatalf("%s: kids %v, want %v", s.name, v.Kids(), s.kids)
		}
		for _, k := range []edKey{a, b, c} {
			want := false
			for _, kid := range s.kids {
				want = want || kid == k.kid
			}
			sub, err := v.Verify(k.token(t))
			if want && (err != nil || sub != "user-"+k.kid) {
				t.Fatalf("%s: token of %s refused: %v", s.name, k.kid, err)
			}
			if !want && !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("%s: token of %s: err %v, want ErrUnauthenticated", s.name, k.kid, err)
			}
		}
	}
	if _, err := ParseJWKS([]byte(`{"keys":[]}`), JWTConfig{}); err == nil {
		t.Fatal("empty set accepted")
	}
	parsed, _ := ParseJWKS(mustRead(t, path), JWTConfig{})
	if _, err := parsed.Reload(); !errors.Is(err, ErrInvalidJWKS) {
		t.Fatalf("Reload of a verifier not loaded from a file: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Run reloads on its interval while verifications go on, logs a broken
// file once (not at every tick), and stops with its context.
func TestJWKSRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := newEdKey(t, "a"), newEdKey(t, "b")
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, a, b)
	v, err := LoadJWKSFile(path, JWTConfig{Reload: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx, slog.New(slog.NewTextHandler(&logs, nil))) }()
	stopped := false
	stop := func() { // Run stops with its context
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not stop with its context")
		}
	}
	defer stop()

	tokA, tokB := a.token(t), b.token(t)
	if _, err := v.Verify(tokB); err != nil {
		t.Fatalf("b before the reload: %v", err)
	}
	writeJWKS(t, path, a)
	testenv.Eventually(t, 5*time.Second, "b refused", func() bool { _, err := v.Verify(tokB); return errors.Is(err, ErrUnauthenticated) })
	if _, err := v.Verify(tokA); err != nil {
		t.Fatalf("a after the reload: %v", err)
	}
	writeFile(t, path, []byte("not json"))
	testenv.Eventually(t, 5*time.Second, "the failure logged", func() bool { return strings.Contains(logs.String(), "JWKS reload failed") })
	time.Sleep(100 * time.Millisecond) // ten more ticks on the broken file
	if _, err := v.Verify(tokA); err != nil {
		t.Fatalf("a with a broken file: %v", err)
	}
	if n := strings.Count(logs.String(), "JWKS reload failed"); n != 1 {
		t.Fatalf("a broken file logged %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "JWKS reloaded"); n != 1 {
		t.Fatalf("%d reloads logged, want 1:\n%s", n, logs.String())
	}
	stop()
}

func TestJWTConfigValidate(t *testing.T) {
	if err := DefaultJWTConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []JWTConfig{{Leeway: -time.Second}, {Leeway: 2 * time.Hour}, {Reload: -time.Second}, {Reload: time.Millisecond}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidJWTConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
		if _, err := ParseJWKS([]byte(`{}`), bad); !errors.Is(err, ErrInvalidJWTConfig) {
			t.Errorf("ParseJWKS with %+v: %v", bad, err)
		}
	}
}
