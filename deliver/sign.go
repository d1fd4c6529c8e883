package deliver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// HeaderSignature is t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>.
	HeaderSignature = "Auditrail-Signature"
	// HeaderDeliveryID names a batch; its retries carry the same id.
	HeaderDeliveryID = "Auditrail-Delivery-Id"
)

// DefaultTolerance is how far a signature's time may be from the
// receiver's clock.
const DefaultTolerance = 5 * time.Minute

// Sign returns the Auditrail-Signature header of body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks header (the Auditrail-Signature of body) against secret:
// one of its v1 values must be the HMAC (compared in constant time) and
// its t within tolerance of now.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if header == "" {
		return ErrNoSignature
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: malformed %q", ErrBadSignature, part)
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return fmt.Errorf("%w: v1 is not a hex SHA-256", ErrBadSignature)
			}
			sigs = append(sigs, b)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: t and v1 are required", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s from now", ErrStale, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		ok = hmac.Equal(s, want) || ok
	}
	if !ok {
		return ErrBadSignature
	}
	return nil
}
