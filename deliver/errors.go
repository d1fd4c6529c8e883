package deliver

import "errors"

// ErrInvalidOption wraps every configuration error.
var ErrInvalidOption = errors.New("invalid option")

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("no signature")
	ErrBadSignature = errors.New("signature does not match")
	ErrStale        = errors.New("signature time outside the tolerance")
)
