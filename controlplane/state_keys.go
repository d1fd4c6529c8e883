package controlplane

// The KV keys of each kind of resource.

import "encoding/base64"

// keyByHash returns the KV key of the API key with this hash.
func (s *State) keyByHash(hash string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.byHash[hash]
	return k, ok
}

// enc makes any string safe as a KV key token.
func enc(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// KV keys of each kind of resource.
func orgKey(org string) string              { return "org." + org }
func projectKey(org, p string) string       { return "project." + org + "." + p }
func memberKey(org, user string) string     { return "member." + org + "." + enc(user) }
func pmemberKey(org, p, user string) string { return "pmember." + org + "." + p + "." + enc(user) }
func apiKeyKey(org, id string) string       { return "apikey." + org + "." + id }
func hookKey(org, scope, id string) string  { return "hook." + org + "." + scope + "." + id }
func secretKey(org, p, name string) string  { return "secret." + org + "." + p + "." + enc(name) }
func connKey(org, p, user, prov string) string {
	return "conn." + org + "." + p + "." + enc(user) + "." + enc(prov)
}
func providerKey(org, id string) string { return "provider." + org + "." + enc(id) }
