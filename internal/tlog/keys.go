package tlog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// AlgorithmEd25519 is the one signature algorithm of the log's keys.
const AlgorithmEd25519 = "Ed25519"

// TimeFormat is how key validity times and checkpoint times are written:
// RFC 3339 in UTC with milliseconds, as every time of the API.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// PublicKey is a checkpoint signing key as GET /api/v1/audit_keys lists
// it. A key is valid for checkpoints whose time t has NotBefore <= t and,
// once the key is retired, t < NotAfter.
type PublicKey struct {
	// KeyID is the note key hash of the key (the first 4 bytes of
	// SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key), as in every signature
	// line), as 8 lowercase hex digits.
	KeyID     string     `json:"key_id"`
	Algorithm string     `json:"algorithm"`
	PublicKey string     `json:"public_key"` // standard base64 of the 32 raw bytes
	Name      string     `json:"name"`       // the signer name of the note's signature lines
	NotBefore time.Time  `json:"not_before"`
	NotAfter  *time.Time `json:"not_after"` // nil while the key is current
}

// MarshalJSON writes the times in TimeFormat.
func (k PublicKey) MarshalJSON() ([]byte, error) {
	type wire struct {
		KeyID     string  `json:"key_id"`
		Algorithm string  `json:"algorithm"`
		PublicKey string  `json:"public_key"`
		Name      string  `json:"name"`
		NotBefore string  `json:"not_before"`
		NotAfter  *string `json:"not_after"`
		// VKey is the key as a note verifier key, for a witness.
		VKey string `json:"vkey,omitempty"`
	}
	w := wire{KeyID: k.KeyID, Algorithm: k.Algorithm, PublicKey: k.PublicKey, Name: k.Name, NotBefore: k.NotBefore.UTC().Format(TimeFormat)}
	w.VKey, _ = k.VKey() // omitted for a key that has none (not Ed25519)
	if k.NotAfter != nil {
		s := k.NotAfter.UTC().Format(TimeFormat)
		w.NotAfter = &s
	}
	return json.Marshal(w)
}

// ValidAt reports whether the key may sign a checkpoint of time t.
func (k PublicKey) ValidAt(t time.Time) bool {
	return !t.Before(k.NotBefore) && (k.NotAfter == nil || t.Before(*k.NotAfter))
}

// Retire returns k with NotAfter set to t (a rotation retires the current
// key at the new key's NotBefore).
func (k PublicKey) Retire(t time.Time) PublicKey {
	t = t.UTC()
	k.NotAfter = &t
	return k
}

// Verifier checks k's fields (algorithm, key length, name, key_id) and
// returns the note verifier of the key.
func (k PublicKey) Verifier() (note.Verifier, error) {
	if k.Algorithm != AlgorithmEd25519 {
		return nil, fmt.Errorf("%w: key %q: algorithm %q (want %s)", ErrMalformedKey, k.KeyID, k.Algorithm, AlgorithmEd25519)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(k.PublicKey)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: key %q: public_key is not the base64 of %d bytes", ErrMalformedKey, k.KeyID, ed25519.PublicKeySize)
	}
	if !validName(k.Name) {
		return nil, fmt.Errorf("%w: key %q: name %q is empty or has a space or a '+'", ErrMalformedKey, k.KeyID, k.Name)
	}
	vkey, err := note.NewEd25519VerifierKey(k.Name, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %w", ErrMalformedKey, k.KeyID, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %w", ErrMalformedKey, k.KeyID, err)
	}
	if want := KeyID(v.KeyHash()); k.KeyID != want {
		return nil, fmt.Errorf("%w: key %q: key_id does not match the key (its hash is %s)", ErrMalformedKey, k.KeyID, want)
	}
	if k.NotAfter != nil && !k.NotAfter.After(k.NotBefore) {
		return nil, fmt.Errorf("%w: key %q: not_after is not after not_before", ErrMalformedKey, k.KeyID)
	}
	return v, nil
}

// VKey is the key's signed-note verifier key (name+hash+base64 of 0x01 and
// the 32 raw bytes): what a witness is told to verify the log's
// checkpoints with (and what x/mod's note.NewVerifier reads).
func (k PublicKey) VKey() (string, error) {
	raw, err := base64.StdEncoding.Strict().DecodeString(k.PublicKey)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: key %q: public_key is not the base64 of %d bytes", ErrMalformedKey, k.KeyID, ed25519.PublicKeySize)
	}
	vkey, err := note.NewEd25519VerifierKey(k.Name, raw)
	if err != nil {
		return "", fmt.Errorf("%w: key %q: %w", ErrMalformedKey, k.KeyID, err)
	}
	return vkey, nil
}

// KeyID formats a note key hash as a key_id (8 lowercase hex digits).
func KeyID(hash uint32) string { return fmt.Sprintf("%08x", hash) }

// validName is the signed-note rule for key names: non-empty UTF-8 without
// spaces or '+'. The log's names are also printable ASCII, so that they can
// be typed and logged as they are.
func validName(name string) bool {
	if name == "" || len(name) > 256 || !utf8.ValidString(name) || strings.ContainsRune(name, '+') {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || r < 0x21 || r > 0x7e }) < 0
}

// PrivateKey is a checkpoint signing key. Its bytes (Marshal) are what the
// control plane seals; it never prints them: String, GoString, LogValue
// and MarshalJSON show only its name and key_id.
type PrivateKey struct {
	// Both behind pointers: fmt prints a pointer nested in a value as an
	// address, so even a PrivateKey in an unexported field of a printed
	// struct shows no key material.
	skey   *[]byte
	signer note.Signer
}

// GenerateKey makes a new Ed25519 key named name (the signer name of the
// note's signature lines: printable ASCII without spaces or '+'), valid
// from notBefore.
func GenerateKey(name string, notBefore time.Time) (PrivateKey, PublicKey, error) {
	if !validName(name) {
		return PrivateKey{}, PublicKey{}, fmt.Errorf("%w: name %q is empty, too long, or has a space, a '+' or a non-ASCII character", ErrMalformedKey, name)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return PrivateKey{}, PublicKey{}, fmt.Errorf("%w: %w", ErrMalformedKey, err)
	}
	priv, err := ParsePrivateKey([]byte(skey))
	if err != nil {
		return PrivateKey{}, PublicKey{}, err
	}
	// vkey is name+hash+base64(0x01 ‖ key).
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return PrivateKey{}, PublicKey{}, fmt.Errorf("%w: unexpected verifier key", ErrMalformedKey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize {
		return PrivateKey{}, PublicKey{}, fmt.Errorf("%w: unexpected verifier key", ErrMalformedKey)
	}
	pub := PublicKey{KeyID: priv.KeyID(), Algorithm: AlgorithmEd25519, PublicKey: base64.StdEncoding.EncodeToString(raw[1:]),
		Name: name, NotBefore: notBefore.UTC().Truncate(time.Millisecond)}
	return priv, pub, nil
}

// ParsePrivateKey reads the bytes Marshal returned.
func ParsePrivateKey(b []byte) (PrivateKey, error) {
	s, err := note.NewSigner(string(b))
	if err != nil {
		// The note package's error does not quote the key; ours does not either.
		return PrivateKey{}, fmt.Errorf("%w: not a private key of the log", ErrMalformedKey)
	}
	if !validName(s.Name()) {
		return PrivateKey{}, fmt.Errorf("%w: private key name", ErrMalformedKey)
	}
	kb := bytes.Clone(b)
	return PrivateKey{skey: &kb, signer: s}, nil
}

// Marshal returns the key's bytes (the note signer key text), to be
// sealed. The caller must not log or print them.
func (k PrivateKey) Marshal() []byte {
	if k.skey == nil {
		return nil
	}
	return bytes.Clone(*k.skey)
}

// Name is the key's signer name.
func (k PrivateKey) Name() string {
	if k.signer == nil {
		return ""
	}
	return k.signer.Name()
}

// KeyID is the key's key_id.
func (k PrivateKey) KeyID() string {
	if k.signer == nil {
		return ""
	}
	return KeyID(k.signer.KeyHash())
}

// String shows the name and key_id only.
func (k PrivateKey) String() string {
	return "tlog.PrivateKey{name: " + strconv.Quote(k.Name()) + ", key_id: " + k.KeyID() + ", key: REDACTED}"
}

// GoString is String (so %#v does not print the key either).
func (k PrivateKey) GoString() string { return k.String() }

// LogValue shows the name and key_id only.
func (k PrivateKey) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", k.Name()), slog.String("key_id", k.KeyID()))
}

// MarshalJSON shows the name and key_id only: the key is not JSON.
func (k PrivateKey) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"name": k.Name(), "key_id": k.KeyID()})
}

// KeySet is the set of public keys a verifier trusts.
type KeySet struct {
	keys  []PublicKey
	verif map[nameHash]keyEntry
}

type nameHash struct {
	name string
	hash uint32
}

type keyEntry struct {
	key PublicKey
	v   note.Verifier
}

// MaxKeysFileBytes and MaxKeys bound what ParseKeySet reads.
const (
	MaxKeysFileBytes = 1 << 20
	MaxKeys          = 1000
)

// NewKeySet checks each key (see PublicKey.Verifier) and returns the set.
// Two keys with one name and key hash are refused.
func NewKeySet(keys ...PublicKey) (KeySet, error) {
	if len(keys) > MaxKeys {
		return KeySet{}, fmt.Errorf("%w: %d keys (at most %d)", ErrTooLarge, len(keys), MaxKeys)
	}
	ks := KeySet{verif: make(map[nameHash]keyEntry, len(keys))}
	for _, k := range keys {
		v, err := k.Verifier()
		if err != nil {
			return KeySet{}, err
		}
		nh := nameHash{v.Name(), v.KeyHash()}
		if _, dup := ks.verif[nh]; dup {
			return KeySet{}, fmt.Errorf("%w: key %s %s listed twice", ErrMalformedKey, k.Name, k.KeyID)
		}
		ks.verif[nh] = keyEntry{key: k, v: v}
		ks.keys = append(ks.keys, k)
	}
	return ks, nil
}

// Keys lists the set's keys.
func (ks KeySet) Keys() []PublicKey { return append([]PublicKey(nil), ks.keys...) }

// Verifier implements note.Verifiers.
func (ks KeySet) Verifier(name string, hash uint32) (note.Verifier, error) {
	e, ok := ks.verif[nameHash{name, hash}]
	if !ok {
		return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
	}
	return e.v, nil
}

// ParseKeySet reads a keys file: the answer of GET /api/v1/audit_keys
// ({"code":200,"msg":…,"data":[…]}) or its bare data array. Times are RFC
// 3339. Unknown members are ignored; a key that does not check out (see
// PublicKey.Verifier) fails the whole file.
func ParseKeySet(b []byte) (KeySet, error) {
	if len(b) > MaxKeysFileBytes {
		return KeySet{}, fmt.Errorf("%w: keys file of %d bytes (at most %d)", ErrTooLarge, len(b), MaxKeysFileBytes)
	}
	b = bytes.TrimSpace(b)
	var raw []json.RawMessage
	switch {
	case len(b) > 0 && b[0] == '[':
		if err := json.Unmarshal(b, &raw); err != nil {
			return KeySet{}, fmt.Errorf("%w: keys file: %w", ErrMalformedKey, err)
		}
	case len(b) > 0 && b[0] == '{':
		var env struct {
			Code *int            `json:"code"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			return KeySet{}, fmt.Errorf("%w: keys file: %w", ErrMalformedKey, err)
		}
		if env.Code != nil && *env.Code != 200 {
			return KeySet{}, fmt.Errorf("%w: keys file is an error answer (code %d)", ErrMalformedKey, *env.Code)
		}
		if err := json.Unmarshal(env.Data, &raw); err != nil || env.Data == nil {
			return KeySet{}, fmt.Errorf("%w: keys file: data is not an array of keys", ErrMalformedKey)
		}
	default:
		return KeySet{}, fmt.Errorf("%w: keys file is neither the audit_keys answer nor an array of keys", ErrMalformedKey)
	}
	if len(raw) > MaxKeys {
		return KeySet{}, fmt.Errorf("%w: %d keys (at most %d)", ErrTooLarge, len(raw), MaxKeys)
	}
	keys := make([]PublicKey, 0, len(raw))
	for i, r := range raw {
		var w struct {
			KeyID     string  `json:"key_id"`
			Algorithm string  `json:"algorithm"`
			PublicKey string  `json:"public_key"`
			Name      string  `json:"name"`
			NotBefore string  `json:"not_before"`
			NotAfter  *string `json:"not_after"`
		}
		if err := json.Unmarshal(r, &w); err != nil {
			return KeySet{}, fmt.Errorf("%w: key %d: %w", ErrMalformedKey, i, err)
		}
		k := PublicKey{KeyID: w.KeyID, Algorithm: w.Algorithm, PublicKey: w.PublicKey, Name: w.Name}
		t, err := time.Parse(time.RFC3339Nano, w.NotBefore)
		if err != nil {
			return KeySet{}, fmt.Errorf("%w: key %d (%.16q): not_before is not an RFC 3339 time", ErrMalformedKey, i, w.KeyID)
		}
		k.NotBefore = t
		if w.NotAfter != nil {
			t, err := time.Parse(time.RFC3339Nano, *w.NotAfter)
			if err != nil {
				return KeySet{}, fmt.Errorf("%w: key %d (%.16q): not_after is not an RFC 3339 time or null", ErrMalformedKey, i, w.KeyID)
			}
			k.NotAfter = &t
		}
		keys = append(keys, k)
	}
	return NewKeySet(keys...)
}
