package query

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// Cursor errors; the API answers all of them with 400.
var (
	ErrCursorMalformed = errors.New("cursor is malformed")
	ErrCursorSignature = errors.New("cursor signature does not verify")
	ErrCursorScope     = errors.New("cursor belongs to another listing (scope or filters differ)")
)

// CursorCodec makes opaque cursors: a keyset position bound to the listing
// it came from (route, organization, project, filters) and signed with
// HMAC-SHA256. The first key signs; every key verifies, so that cursors
// handed out before a key rotation keep working.
type CursorCodec struct {
	keys [][]byte
}

// NewCursorCodec returns a codec; keys[0] signs. Keys must be at least 16 bytes.
func NewCursorCodec(keys ...[]byte) (*CursorCodec, error) {
	if len(keys) == 0 {
		return nil, errors.New("cursor codec needs at least one key")
	}
	for i, k := range keys {
		if len(k) < 16 {
			return nil, fmt.Errorf("cursor key %d is shorter than 16 bytes", i)
		}
	}
	return &CursorCodec{keys: keys}, nil
}

const (
	cursorVersion = 1
	scopeLen      = 16
	macLen        = 16
	// version, timestamp ms, event id, scope digest, mac
	cursorLen = 1 + 8 + 16 + scopeLen + macLen
)

// Scope is the digest of what a cursor may be used with.
func Scope(parts ...string) [scopeLen]byte {
	h := sha256.New()
	for _, p := range parts {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var out [scopeLen]byte
	copy(out[:], h.Sum(nil))
	return out
}

// Encode returns the cursor of position k in the listing of scope.
func (c *CursorCodec) Encode(k auditstore.Key, scope [scopeLen]byte) string {
	b := make([]byte, 0, cursorLen)
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(k.Timestamp.UnixMilli()))
	b = append(b, k.EventID[:]...)
	b = append(b, scope[:]...)
	b = append(b, c.mac(c.keys[0], b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode verifies a cursor and returns its position; the cursor must have
// been made for scope.
func (c *CursorCodec) Decode(s string, scope [scopeLen]byte) (auditstore.Key, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != cursorLen || b[0] != cursorVersion {
		return auditstore.Key{}, ErrCursorMalformed
	}
	body, sig := b[:cursorLen-macLen], b[cursorLen-macLen:]
	if !c.verify(body, sig) {
		return auditstore.Key{}, ErrCursorSignature
	}
	if !hmac.Equal(body[25:25+scopeLen], scope[:]) {
		return auditstore.Key{}, ErrCursorScope
	}
	ms := int64(binary.BigEndian.Uint64(body[1:9]))
	id, _ := uuid.FromBytes(body[9:25])
	return auditstore.Key{Timestamp: time.UnixMilli(ms).UTC(), EventID: id}, nil
}

// verify reports whether sig is the MAC of body under one of the keys.
func (c *CursorCodec) verify(body, sig []byte) bool {
	for _, k := range c.keys {
		if hmac.Equal(sig, c.mac(k, body)) {
			return true
		}
	}
	return false
}

func (c *CursorCodec) mac(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return m.Sum(nil)[:macLen]
}
