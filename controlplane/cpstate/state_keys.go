package cpstate

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
func OrgKey(org string) string          { return "org." + org }
func ProjectKey(org, p string) string   { return "project." + org + "." + p }
func MemberKey(org, user string) string { return "member." + org + "." + enc(user) }
func ProjectMemberKey(org, p, user string) string {
	return "pmember." + org + "." + p + "." + enc(user)
}
func APIKeyKey(org, id string) string      { return "apikey." + org + "." + id }
func HookKey(org, scope, id string) string { return "hook." + org + "." + scope + "." + id }
func SecretKey(org, p, name string) string { return "secret." + org + "." + p + "." + enc(name) }
func ConnKey(org, p, user, prov string) string {
	return "conn." + org + "." + p + "." + enc(user) + "." + enc(prov)
}

// UserConnPrefix is the prefix of the keys of user's connections in
// project p of org.
func UserConnPrefix(org, p, user string) string {
	return "conn." + org + "." + p + "." + enc(user) + "."
}

func ProviderKey(org, id string) string { return "provider." + org + "." + enc(id) }
