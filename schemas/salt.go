package schemas

import (
	"crypto/rand"
	"fmt"

	"github.com/auditrail/auditrail/internal/tlog"
)

// SaltBytes is the length of an event's salt.
const SaltBytes = tlog.SaltBytes

// NewSalt returns SaltBytes bytes from crypto/rand.
func NewSalt() ([]byte, error) {
	s := make([]byte, SaltBytes)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("salt: %w", err)
	}
	return s, nil
}

func ensureSalt(s *[]byte) error {
	if len(*s) > 0 {
		return nil
	}
	salt, err := NewSalt()
	if err != nil {
		return err
	}
	*s = salt
	return nil
}

// validateSalt accepts no salt or one of SaltBytes bytes.
func validateSalt(s []byte) error {
	if len(s) != 0 && len(s) != SaltBytes {
		return fmt.Errorf("%w: salt of %d bytes, want %d", ErrInvalidEvent, len(s), SaltBytes)
	}
	return nil
}

// readSalt reads the optional salt, a msgpack bin (nil, or an empty bin:
// none). Its length is checked by Validate.
func readSalt(r *mpReader) ([]byte, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	if c == 0xc0 {
		r.off++
		return nil, nil
	}
	if !isBinCode(c) {
		return nil, fmt.Errorf("%w: salt must be binary", ErrDecode)
	}
	v, err := r.str()
	if err != nil || len(v) == 0 {
		return nil, err
	}
	return append([]byte(nil), v...), nil
}
