package auth

import (
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrInvalidJWKS is returned for a key set that cannot be used.
var ErrInvalidJWKS = errors.New("invalid JWKS")

// JWTVerifier verifies bearer JWTs against a configured key set: HS256 with
// "oct" keys, RS256 with "RSA" keys, EdDSA with "OKP" Ed25519 keys. Every
// token must name its key (kid); the algorithm must be the one of that key
// (no alg confusion, no "none"); exp is required and exp/nbf are checked.
type JWTVerifier struct {
	keys     map[string]jwk
	issuer   string
	audience string
	leeway   time.Duration
	now      func() time.Time
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
}

// LoadJWKSFile reads a JWKS file.
func LoadJWKSFile(path string, cfg JWTConfig) (*JWTVerifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidJWKS, err)
	}
	return ParseJWKS(b, cfg)
}

// ParseJWKS parses a JSON Web Key Set.
func ParseJWKS(b []byte, cfg JWTConfig) (*JWTVerifier, error) {
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
	v := &JWTVerifier{keys: map[string]jwk{}, issuer: cfg.Issuer, audience: cfg.Audience, leeway: cfg.Leeway, now: time.Now}
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
	tok, err := jwt.Parse(token, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		k, ok := v.keys[kid]
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
