package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Errors of the JWT verifier.
var (
	// ErrInvalidJWKS is returned for a key set that cannot be used.
	ErrInvalidJWKS = errors.New("invalid JWKS")
	// ErrInvalidJWTConfig is returned for a JWTConfig out of range.
	ErrInvalidJWTConfig = errors.New("invalid JWT configuration")
)

// DefaultJWKSReload is how often a JWKS file is read again by default.
const DefaultJWKSReload = 30 * time.Second

// JWTVerifier verifies bearer JWTs against a configured key set: HS256 with
// "oct" keys, RS256 with "RSA" keys, EdDSA with "OKP" Ed25519 keys. Every
// token must name its key (kid); the algorithm must be the one of that key
// (no alg confusion, no "none"); exp is required and exp/nbf are checked.
//
// A verifier loaded from a file reads it again (Reload, or Run every
// JWTConfig.Reload), so that a key removed from the file stops verifying
// without a restart; a file that cannot be read or parsed keeps the keys
// in use.
type JWTVerifier struct {
	keys     atomic.Pointer[keySet]
	issuer   string
	audience string
	leeway   time.Duration
	reload   time.Duration
	now      func() time.Time
	// path is the JWKS file ("" when parsed from bytes).
	path string
	// lastBad is the content of the last file refused, so that a broken
	// file is logged once, not at every reload (used by Run only).
	lastBad []byte
}

// keySet is the keys of one reading of the JWKS, by kid, and its source.
type keySet struct {
	keys map[string]jwk
	raw  []byte
}

type jwk struct {
	alg string
	key any
}

// JWTConfig configures a verifier.
type JWTConfig struct {
	// Issuer and Audience, when set, must match iss and aud.
	Issuer, Audience string
	// Leeway tolerates clock skew in exp and nbf.
	Leeway time.Duration
	// Reload is how often Run reads the JWKS file again (0:
	// DefaultJWKSReload).
	Reload time.Duration
}

// DefaultJWTConfig returns the defaults: no iss or aud required, 30 s of
// leeway, the file read again every DefaultJWKSReload.
func DefaultJWTConfig() JWTConfig {
	return JWTConfig{Leeway: 30 * time.Second, Reload: DefaultJWKSReload}
}

// Validate checks the durations.
func (c JWTConfig) Validate() error {
	if c.Leeway < 0 || c.Leeway > time.Hour {
		return fmt.Errorf("%w: leeway %s must be from 0 to 1h", ErrInvalidJWTConfig, c.Leeway)
	}
	if c.Reload < 0 || c.Reload > 0 && c.Reload < 10*time.Millisecond {
		return fmt.Errorf("%w: JWKS reload interval %s must be 10ms or more", ErrInvalidJWTConfig, c.Reload)
	}
	return nil
}

// LoadJWKSFile reads a JWKS file; Reload and Run read it again.
func LoadJWKSFile(path string, cfg JWTConfig) (*JWTVerifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidJWKS, err)
	}
	v, err := ParseJWKS(b, cfg)
	if err != nil {
		return nil, err
	}
	v.path = path
	return v, nil
}

// ParseJWKS parses a JSON Web Key Set.
func ParseJWKS(b []byte, cfg JWTConfig) (*JWTVerifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Reload == 0 {
		cfg.Reload = DefaultJWKSReload
	}
	ks, err := parseKeySet(b)
	if err != nil {
		return nil, err
	}
	v := &JWTVerifier{issuer: cfg.Issuer, audience: cfg.Audience, leeway: cfg.Leeway, reload: cfg.Reload, now: time.Now}
	v.keys.Store(ks)
	return v, nil
}

// Kids returns the kids of the keys in use, sorted.
func (v *JWTVerifier) Kids() []string {
	ks := v.keys.Load()
	kids := make([]string, 0, len(ks.keys))
	for kid := range ks.keys {
		kids = append(kids, kid)
	}
	slices.Sort(kids)
	return kids
}

// Reload reads the JWKS file again and uses its keys from now on. It
// returns whether the keys changed; on an error (unreadable file, invalid
// key set) the keys in use are kept.
func (v *JWTVerifier) Reload() (changed bool, err error) {
	_, changed, err = v.reloadFile()
	return changed, err
}

// reloadFile is Reload, and returns the content read (nil if unreadable).
func (v *JWTVerifier) reloadFile() (b []byte, changed bool, err error) {
	if v.path == "" {
		return nil, false, fmt.Errorf("%w: not loaded from a file", ErrInvalidJWKS)
	}
	if b, err = os.ReadFile(v.path); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalidJWKS, err)
	}
	if bytes.Equal(b, v.keys.Load().raw) {
		return b, false, nil
	}
	ks, err := parseKeySet(b)
	if err != nil {
		return b, false, fmt.Errorf("%w (%s)", err, v.path)
	}
	v.keys.Store(ks)
	return b, true, nil
}

// Run reads the JWKS file again every JWTConfig.Reload until ctx ends, and
// logs each change of keys and each failure (once per broken content: the
// keys in use stay). It returns nil when ctx ends.
func (v *JWTVerifier) Run(ctx context.Context, log *slog.Logger) error {
	if v.path == "" {
		return fmt.Errorf("%w: not loaded from a file", ErrInvalidJWKS)
	}
	t := time.NewTicker(v.reload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		v.reloadLogged(log)
	}
}

func (v *JWTVerifier) reloadLogged(log *slog.Logger) {
	b, changed, err := v.reloadFile()
	switch {
	case err != nil:
		if v.lastBad != nil && bytes.Equal(b, v.lastBad) {
			return // this content was refused and logged already
		}
		v.lastBad = append([]byte{}, b...) // unreadable: empty, not nil
		log.Warn("JWKS reload failed; the keys in use are kept", "path", v.path, "kids", v.Kids(), "err", err)
	case changed:
		v.lastBad = nil
		log.Info("JWKS reloaded", "path", v.path, "kids", v.Kids())
	default:
		v.lastBad = nil
	}
}

// parseKeySet parses a JSON Web Key Set.
func parseKeySet(b []byte) (*keySet, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Alg string `json:"alg"`
			Crv string `json:"crv"`
			K   string `json:"k"`
			N   string `json:"n"`
			E   string `json:"e"`
			X   string `json:"x"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidJWKS, err)
	}
	v := &keySet{keys: map[string]jwk{}, raw: append([]byte{}, b...)}
	for i, k := range set.Keys {
		if k.Kid == "" {
			return nil, fmt.Errorf("%w: key %d has no kid", ErrInvalidJWKS, i)
		}
		if _, dup := v.keys[k.Kid]; dup {
			return nil, fmt.Errorf("%w: kid %q twice", ErrInvalidJWKS, k.Kid)
		}
		var parsed jwk
		switch k.Kty {
		case "oct":
			secret, err := base64.RawURLEncoding.DecodeString(k.K)
			if err != nil || len(secret) < 32 {
				return nil, fmt.Errorf("%w: kid %q: HS256 secret must be base64url of at least 32 bytes", ErrInvalidJWKS, k.Kid)
			}
			parsed = jwk{alg: "HS256", key: secret}
		case "RSA":
			n, err1 := base64.RawURLEncoding.DecodeString(k.N)
			e, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(n) < 256 || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("%w: kid %q: RSA key needs n (2048 bits or more) and e", ErrInvalidJWKS, k.Kid)
			}
			parsed = jwk{alg: "RS256", key: &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}}
		case "OKP":
			x, err := base64.RawURLEncoding.DecodeString(k.X)
			if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("%w: kid %q: OKP key must be Ed25519 with x", ErrInvalidJWKS, k.Kid)
			}
			parsed = jwk{alg: "EdDSA", key: ed25519.PublicKey(x)}
		default:
			return nil, fmt.Errorf("%w: kid %q: kty %q not supported (oct, RSA, OKP)", ErrInvalidJWKS, k.Kid, k.Kty)
		}
		if k.Alg != "" && k.Alg != parsed.alg {
			return nil, fmt.Errorf("%w: kid %q: alg %q does not fit kty %q", ErrInvalidJWKS, k.Kid, k.Alg, k.Kty)
		}
		v.keys[k.Kid] = parsed
	}
	if len(v.keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidJWKS)
	}
	return v, nil
}

// LooksLikeJWT reports whether a credential has the shape of a JWS.
func LooksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 && strings.HasPrefix(s, "eyJ") }

// Verify checks a token and returns its subject.
func (v *JWTVerifier) Verify(token string) (string, error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"HS256", "RS256", "EdDSA"}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(v.leeway),
		jwt.WithTimeFunc(v.now),
	}
	if v.issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.issuer))
	}
	if v.audience != "" {
		opts = append(opts, jwt.WithAudience(v.audience))
	}
	keys := v.keys.Load().keys // one key set for the whole check
	tok, err := jwt.Parse(token, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		k, ok := keys[kid]
		if !ok {
			return nil, fmt.Errorf("unknown kid %q", kid)
		}
		if t.Method.Alg() != k.alg {
			return nil, fmt.Errorf("alg %s does not fit key %q (%s)", t.Method.Alg(), kid, k.alg)
		}
		return k.key, nil
	}, opts...)
	if err != nil {
		return "", fmt.Errorf("%w: jwt: %v", ErrUnauthenticated, err)
	}
	sub, err := tok.Claims.GetSubject()
	if err != nil || sub == "" {
		return "", fmt.Errorf("%w: jwt has no sub", ErrUnauthenticated)
	}
	return sub, nil
}
