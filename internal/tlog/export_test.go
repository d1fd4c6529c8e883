package tlog

// CanonicalJSON is the canonicalizer on any JSON value (Canonical wants an
// object), for the differential tests against github.com/gowebpki/jcs.
func CanonicalJSON(b []byte) ([]byte, error) {
	var c canonicalizer
	return c.canonical(nil, b)
}
