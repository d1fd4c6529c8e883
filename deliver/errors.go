package deliver

import "errors"

// ErrInvalidOption wraps every configuration error.
var ErrInvalidOption = errors.New("invalid option")

// ErrOrganizationMismatch marks an event whose payload names another
// organization than its subject (or than the destination's): it is never
// delivered, to either organization (ingest sends it to the dead-letter
// stream).
var ErrOrganizationMismatch = errors.New("organization_id does not match the subject")

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("no signature")
	ErrBadSignature = errors.New("signature does not match")
	ErrStale        = errors.New("signature time outside the tolerance")
)
