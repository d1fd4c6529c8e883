// Package pagetoken seals the pagination tokens that toolkits hand to
// callers: what a token holds (a provider's page token or next link) comes
// back from the caller, so it is signed with a server key (HMAC-SHA256,
// like the audit cursor: the first key signs, every key verifies, so that
// tokens survive a rotation) and bound to the listing it continues (the
// user, the API base, the tool and its other inputs). A caller can neither
// forge nor alter one, nor use it with another listing.
//
// A token is "<purpose>.<base64url(version | binding digest | payload |
// mac)>", at most MaxTokenLen characters; the MAC covers the purpose too,
// so a token of one toolkit is refused by another.
package pagetoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Errors of New, Seal and Open.
var (
	// ErrInvalidKeys: no key, or one shorter than MinKeyLen.
	ErrInvalidKeys = errors.New("pagetoken: invalid keys")
	// ErrTooLong: the payload does not fit in MaxTokenLen.
	ErrTooLong = errors.New("pagetoken: payload too long")
	// ErrMalformed: not a token of this purpose and version.
	ErrMalformed = errors.New("pagetoken: malformed token")
	// ErrSignature: no key verifies the token (forged, altered, or signed
	// with a key no longer configured).
	ErrSignature = errors.New("pagetoken: signature does not verify")
	// ErrBinding: a genuine token of another listing.
	ErrBinding = errors.New("pagetoken: token of another listing")
)

const (
	// MinKeyLen is the shortest key accepted.
	MinKeyLen = 16
	// MaxTokenLen bounds a token, and so what Open decodes.
	MaxTokenLen = 8 << 10

	version = 1
	bindLen = 16
	macLen  = 16
)

// Sealer seals and opens the tokens of one purpose.
type Sealer struct {
	prefix string
	keys   [][]byte
}

// ValidateKeys reports whether keys can sign tokens: at least one, each at
// least MinKeyLen bytes.
func ValidateKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: at least one key is needed", ErrInvalidKeys)
	}
	for i, k := range keys {
		if len(k) < MinKeyLen {
			return fmt.Errorf("%w: key %d is shorter than %d bytes", ErrInvalidKeys, i, MinKeyLen)
		}
	}
	return nil
}

// New returns a sealer of tokens for purpose (a short name such as "mtk2",
// which also starts every token); keys[0] signs, every key verifies.
func New(purpose string, keys [][]byte) (*Sealer, error) {
	if purpose == "" || strings.ContainsAny(purpose, ".") {
		return nil, fmt.Errorf("pagetoken: purpose %q must be a non-empty name without dots", purpose)
	}
	if err := ValidateKeys(keys); err != nil {
		return nil, err
	}
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = append([]byte(nil), k...)
	}
	return &Sealer{prefix: purpose + ".", keys: ks}, nil
}

// bindingDigest binds a token to its listing.
func (s *Sealer) bindingDigest(binding []byte) []byte {
	h := sha256.New()
	h.Write([]byte(s.prefix))
	h.Write(binding)
	return h.Sum(nil)[:bindLen]
}

func (s *Sealer) mac(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s.prefix))
	m.Write(body)
	return m.Sum(nil)[:macLen]
}

// Seal answers the token of payload for the listing of binding; "" for an
// empty payload (no next page).
func (s *Sealer) Seal(binding, payload []byte) (string, error) {
	if len(payload) == 0 {
		return "", nil
	}
	raw := make([]byte, 0, 1+bindLen+len(payload)+macLen)
	raw = append(raw, version)
	raw = append(raw, s.bindingDigest(binding)...)
	raw = append(raw, payload...)
	raw = append(raw, s.mac(s.keys[0], raw)...)
	if len(s.prefix)+base64.RawURLEncoding.EncodedLen(len(raw)) > MaxTokenLen {
		return "", fmt.Errorf("%w: %d bytes", ErrTooLong, len(payload))
	}
	return s.prefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// Open verifies tok and answers its payload, if tok was sealed by a key of
// the sealer for the listing of binding: ErrMalformed, ErrSignature or
// ErrBinding otherwise.
func (s *Sealer) Open(tok string, binding []byte) ([]byte, error) {
	if len(tok) > MaxTokenLen || !strings.HasPrefix(tok, s.prefix) {
		return nil, ErrMalformed
	}
	// One token per payload: only the alphabet (the decoder skips \r and
	// \n), and Strict rejects variants in the unused bits.
	enc := tok[len(s.prefix):]
	for i := 0; i < len(enc); i++ {
		if c := enc[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, ErrMalformed
		}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(raw) <= 1+bindLen+macLen || raw[0] != version {
		return nil, ErrMalformed
	}
	body, sig := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	ok := false
	for _, k := range s.keys {
		if hmac.Equal(sig, s.mac(k, body)) {
			ok = true
			break
		}
	}
	if !ok {
		return nil, ErrSignature
	}
	if !hmac.Equal(body[1:1+bindLen], s.bindingDigest(binding)) {
		return nil, ErrBinding
	}
	return body[1+bindLen:], nil
}
