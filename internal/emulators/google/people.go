package google

import (
	"net/http"
	"slices"
	"strings"

	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

// Scopes of the People API's people.get for "people/me" (the OpenID
// aliases "profile" and "email" are the same grants).
const (
	ScopeOpenID         = "openid"
	ScopeProfile        = "https://www.googleapis.com/auth/userinfo.profile"
	ScopeEmail          = "https://www.googleapis.com/auth/userinfo.email"
	scopeProfileAlias   = "profile"
	scopeEmailAlias     = "email"
	scopeContacts       = "https://www.googleapis.com/auth/contacts"
	scopeContactsRO     = "https://www.googleapis.com/auth/contacts.readonly"
	scopeUserEmailsRead = "https://www.googleapis.com/auth/user.emails.read"
)

// personFieldPaths are the valid personFields paths of people.get.
var personFieldPaths = []string{"addresses", "ageRanges", "biographies", "birthdays", "calendarUrls", "clientData",
	"coverPhotos", "emailAddresses", "events", "externalIds", "genders", "imClients", "interests", "locales",
	"locations", "memberships", "metadata", "miscKeywords", "names", "nicknames", "occupations", "organizations",
	"phoneNumbers", "photos", "relations", "sipAddresses", "skills", "urls", "userDefined"}

const peopleGetDoc = "Valid paths are documented at https://developers.google.com/people/api/rest/v1/people/get."

// getPerson is GET /v1/people/me?personFields=…: names and photos need the
// profile scope, emailAddresses the email scope; the user has no other data.
func (s *Server) getPerson(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("id") != "me" {
		writeError(w, http.StatusNotFound, "Requested entity was not found.")
		return
	}
	g, ok := s.auth(w, r, ScopeOpenID, ScopeProfile, ScopeEmail, scopeProfileAlias, scopeEmailAlias, scopeContacts,
		scopeContactsRO, scopeUserEmailsRead)
	if !ok {
		return
	}
	raw := r.URL.Query().Get("personFields")
	if raw == "" {
		raw = r.URL.Query().Get("requestMask.includeField")
	}
	if raw == "" {
		writeError(w, http.StatusBadRequest, "personFields mask is required. Please specify one or more valid paths. "+peopleGetDoc)
		return
	}
	var fields []string
	for _, p := range strings.Split(raw, ",") {
		p = strings.TrimPrefix(strings.TrimSpace(p), "person.")
		if !slices.Contains(personFieldPaths, p) {
			writeError(w, http.StatusBadRequest, `Invalid personFields mask path: "`+p+`". `+peopleGetDoc)
			return
		}
		fields = append(fields, p)
	}
	writeJSON(w, s.person(g, fields))
}

func hasAny(g oauth.Grant, scopes ...string) bool {
	return slices.ContainsFunc(scopes, func(sc string) bool { return slices.Contains(g.Scopes, sc) })
}

func (s *Server) person(g oauth.Grant, fields []string) map[string]any {
	pid := permissionID(g.UserID)
	out := map[string]any{"resourceName": "people/" + pid, "etag": "%Eg" + pid[:min(8, len(pid))]}
	profile := hasAny(g, ScopeProfile, scopeProfileAlias, scopeContacts, scopeContactsRO)
	email := hasAny(g, ScopeEmail, scopeEmailAlias, scopeUserEmailsRead)
	source := func(kind string) map[string]any {
		return map[string]any{"primary": true, "verified": kind == "ACCOUNT", "source": map[string]any{"type": kind, "id": pid}}
	}
	for _, f := range fields {
		switch {
		case f == "names" && profile:
			name := s.userName(g.UserID, g.Email)
			given, family, _ := strings.Cut(name, " ")
			n := map[string]any{"metadata": source("PROFILE"), "displayName": name, "givenName": given,
				"unstructuredName": name, "displayNameLastFirst": name}
			if family != "" {
				n["familyName"] = family
				n["displayNameLastFirst"] = family + ", " + given
			}
			out["names"] = []any{n}
		case f == "photos" && profile:
			out["photos"] = []any{map[string]any{"metadata": source("PROFILE"), "url": photoLink, "default": true}}
		case f == "emailAddresses" && email:
			out["emailAddresses"] = []any{map[string]any{"metadata": source("ACCOUNT"), "value": s.userEmail(g.UserID, g.Email)}}
		}
	}
	return out
}
