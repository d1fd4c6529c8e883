package tlog

import "errors"

// Sentinel errors; every error of the package wraps one of them.
var (
	// ErrNotCanonicalizable: the input is not JSON that RFC 8785 can
	// canonicalize (invalid JSON, invalid UTF-8, a lone surrogate, a
	// duplicate member name, a number out of the double range, nested
	// too deep), or not an object where one is required.
	ErrNotCanonicalizable = errors.New("tlog: not canonicalizable JSON")
	// ErrMalformedCheckpoint: a checkpoint's body or its note does not
	// follow C2SP tlog-checkpoint / signed-note as this package writes them.
	ErrMalformedCheckpoint = errors.New("tlog: malformed checkpoint")
	// ErrUnknownKey: no signature of the note is by a key of the key set.
	ErrUnknownKey = errors.New("tlog: checkpoint signed by an unknown key")
	// ErrBadSignature: a signature by a known key does not verify.
	ErrBadSignature = errors.New("tlog: bad checkpoint signature")
	// ErrKeyNotValid: the key that signed the checkpoint was not valid at
	// the checkpoint's time (before not_before, or at or after not_after).
	ErrKeyNotValid = errors.New("tlog: checkpoint signed outside its key's validity")
	// ErrMalformedKey: a key (or the keys file) cannot be parsed.
	ErrMalformedKey = errors.New("tlog: malformed key")
	// ErrTooLarge: an input is larger than this package accepts.
	ErrTooLarge = errors.New("tlog: input too large")
	// ErrInvalidArgument: a size, index or range is out of bounds.
	ErrInvalidArgument = errors.New("tlog: invalid argument")
	// ErrProof: a proof does not verify.
	ErrProof = errors.New("tlog: proof does not verify")
)
