package tlog

import "sync"

var (
	sharedMu sync.Mutex
	shared   canonicalizer
)

// CanonicalJSON is the canonicalizer on any JSON value (Canonical wants an
// object), for the differential tests against github.com/gowebpki/jcs. One
// canonicalizer serves every call, as in the verifier's workers, so that
// the orders it remembers from earlier documents are exercised too.
func CanonicalJSON(b []byte) ([]byte, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return shared.canonical(nil, b)
}
