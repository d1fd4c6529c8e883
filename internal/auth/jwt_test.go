package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

type testKeys struct {
	hs   []byte
	rsa  *rsa.PrivateKey
	ed   ed25519.PrivateKey
	jwks []byte
}

func newTestKeys(t *testing.T) testKeys {
	t.Helper()
	k := testKeys{hs: make([]byte, 32)}
	_, _ = rand.Read(k.hs)
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	k.ed = priv
	b64 := base64.RawURLEncoding.EncodeToString
	k.jwks, _ = json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "oct", "kid": "hs", "k": b64(k.hs), "alg": "HS256"},
		{"kty": "RSA", "kid": "rs", "n": b64(k.rsa.N.Bytes()), "e": b64(big.NewInt(int64(k.rsa.E)).Bytes())},
		{"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": b64(pub)},
	}})
	return k
}

func sign(t *testing.T, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTVerify(t *testing.T) {
	k := newTestKeys(t)
	v, err := ParseJWKS(k.jwks, JWTConfig{Issuer: "https://idp.example", Audience: "auditrail"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "user-1", "iss": "https://idp.example", "aud": "auditrail", "exp": now.Add(time.Hour).Unix()}
		if mut != nil {
			mut(c)
		}
		return c
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	rsaPub := x509PublicBytes(k.rsa)
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"HS256", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(nil)), true},
		{"RS256", sign(t, jwt.SigningMethodRS256, "rs", k.rsa, claims(nil)), true},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, claims(nil)), true},
		{"alg none", none, false},
		{"unknown kid", sign(t, jwt.SigningMethodHS256, "other", k.hs, claims(nil)), false},
		{"no kid", sign(t, jwt.SigningMethodHS256, "", k.hs, claims(nil)), false},
		{"alg confusion: HS256 under the RSA kid", sign(t, jwt.SigningMethodHS256, "rs", rsaPub, claims(nil)), false},
		{"RS256 under the HMAC kid", sign(t, jwt.SigningMethodRS256, "hs", k.rsa, claims(nil)), false},
		{"expired", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })), false},
		{"no exp", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(func(c jwt.MapClaims) { delete(c, "exp") })), false},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() })), false},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(func(c jwt.MapClaims) { c["iss"] = "evil" })), false},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(func(c jwt.MapClaims) { c["aud"] = "other" })), false},
		{"no sub", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(func(c jwt.MapClaims) { delete(c, "sub") })), false},
		{"tampered", sign(t, jwt.SigningMethodHS256, "hs", k.hs, claims(nil)) + "x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := v.Verify(tc.token)
			if tc.ok {
				if err != nil || sub != "user-1" {
					t.Fatalf("sub %q, err %v", sub, err)
				}
				if !LooksLikeJWT(tc.token) {
					t.Error("LooksLikeJWT false for a JWT")
				}
				return
			}
			if !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("err = %v, want ErrUnauthenticated", err)
			}
		})
	}
}

func x509PublicBytes(k *rsa.PrivateKey) []byte { return k.PublicKey.N.Bytes() }

func TestParseJWKSRejects(t *testing.T) {
	for _, bad := range []string{
		`not json`,
		`{"keys":[]}`,
		`{"keys":[{"kty":"oct","k":"c2hvcnQ"}]}`,
		`{"keys":[{"kty":"oct","kid":"a","k":"c2hvcnQ"}]}`,
		`{"keys":[{"kty":"EC","kid":"a"}]}`,
		`{"keys":[{"kty":"OKP","crv":"X25519","kid":"a","x":"AAAA"}]}`,
		`{"keys":[{"kty":"oct","kid":"a","alg":"RS256","k":"` + strings.Repeat("A", 44) + `"}]}`,
	} {
		if _, err := ParseJWKS([]byte(bad), JWTConfig{}); !errors.Is(err, ErrInvalidJWKS) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

func FuzzJWTVerify(f *testing.F) {
	k := newTestKeys(&testing.T{})
	v, _ := ParseJWKS(k.jwks, JWTConfig{})
	f.Add("eyJhbGciOiJIUzI1NiJ9.e30.x")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if sub, err := v.Verify(s); err == nil {
			t.Fatalf("fuzzed token accepted, sub %q", sub)
		}
	})
}
