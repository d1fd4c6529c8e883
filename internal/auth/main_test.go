package auth

import (
	"testing"

	"go.uber.org/goleak"
)

// The JWKS reload goroutine (JWTVerifier.Run) must stop with its context.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
