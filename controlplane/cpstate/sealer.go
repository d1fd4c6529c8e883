package cpstate

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// Sealer encrypts secrets at rest with AES-256-GCM. The first key seals;
// every key opens, so that keys can be rotated. The storage key is bound as
// additional data: a sealed value moved to another key does not open.
type Sealer struct {
	aeads []cipher.AEAD
}

// ErrSealed is returned when a value cannot be opened.
var ErrSealed = errors.New("cannot open sealed value")

// NewSealer returns a sealer; each key must be 32 bytes.
func NewSealer(keys ...[]byte) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("secrets: at least one key is required")
	}
	if len(keys) > 255 {
		return nil, errors.New("secrets: at most 255 keys")
	}
	s := &Sealer{}
	for i, k := range keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("secrets: key %d is %d bytes, want 32", i, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

const sealVersion = 1

// Seal encrypts plaintext for storage under kvKey. Layout: version byte,
// 4-byte fingerprint of the key, nonce, ciphertext.
func (s *Sealer) Seal(kvKey string, plaintext []byte) ([]byte, error) {
	aead := s.aeads[0]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := []byte{sealVersion}
	out = binary.BigEndian.AppendUint32(out, s.fingerprint(0))
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, []byte(kvKey)), nil
}

// Open decrypts a value sealed under kvKey.
func (s *Sealer) Open(kvKey string, sealed []byte) ([]byte, error) {
	if len(sealed) < 5 || sealed[0] != sealVersion {
		return nil, ErrSealed
	}
	fp := binary.BigEndian.Uint32(sealed[1:5])
	for i, aead := range s.aeads {
		if s.fingerprint(i) != fp {
			continue
		}
		rest := sealed[5:]
		if len(rest) < aead.NonceSize() {
			return nil, ErrSealed
		}
		pt, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(kvKey))
		if err != nil {
			return nil, ErrSealed
		}
		return pt, nil
	}
	return nil, fmt.Errorf("%w: sealed with a key that is not configured", ErrSealed)
}

// fingerprint names key i by the first 4 bytes of its encryption of zeros.
func (s *Sealer) fingerprint(i int) uint32 {
	aead := s.aeads[i]
	zero := make([]byte, aead.NonceSize())
	ct := aead.Seal(nil, zero, make([]byte, 4), []byte("auditrail key fingerprint"))
	return binary.BigEndian.Uint32(ct[:4])
}
