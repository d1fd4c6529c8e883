// Package oauthflow is the platform's side of OAuth 2.0 for tools that act
// as a user: the organizations' auth providers (with the real endpoints of
// Google and Microsoft as defaults), the authorization-code flow with a
// sealed single-use state and PKCE, token refresh and revocation — on
// golang.org/x/oauth2, never hand-written.
package oauthflow

import (
	"errors"
	"slices"
	"time"
)

var (
	// ErrNotConnected: the user has no usable connection to the provider
	// (none, marked broken, or its refresh was refused).
	ErrNotConnected = errors.New("not connected")
	// ErrNoProvider: the organization has no auth provider of that id.
	ErrNoProvider = errors.New("no such auth provider")
)

// Connection is what a tool receives of a user's connection.
type Connection struct {
	AccessToken string
	Scopes      []string
	ExpiresAt   *time.Time
	// APIBaseURL is where the provider's toolkits send API calls (the
	// auth provider's api_base_url); empty means the client libraries'
	// own endpoints.
	APIBaseURL string
}

// Provider types.
const (
	TypeGoogle    = "google"
	TypeMicrosoft = "microsoft"
	TypeOAuth2    = "oauth2"
)

// Endpoints of a provider; empty fields of a configured provider take the
// defaults of its type.
type Endpoints struct {
	AuthorizeURL string
	TokenURL     string
	RevokeURL    string
	UserinfoURL  string
	// APIBaseURL is where the provider's toolkits send their API calls;
	// empty means the client libraries' own endpoints.
	APIBaseURL    string
	ScopesDefault []string
}

// Defaults are the real endpoints of the known provider types.
var Defaults = map[string]Endpoints{
	TypeGoogle: {
		AuthorizeURL:  "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL:      "https://oauth2.googleapis.com/token",
		RevokeURL:     "https://oauth2.googleapis.com/revoke",
		UserinfoURL:   "https://openidconnect.googleapis.com/v1/userinfo",
		ScopesDefault: []string{"openid", "email"},
	},
	TypeMicrosoft: {
		AuthorizeURL:  "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
		TokenURL:      "https://login.microsoftonline.com/common/oauth2/v2.0/token",
		UserinfoURL:   "https://graph.microsoft.com/oidc/userinfo",
		APIBaseURL:    "https://graph.microsoft.com/v1.0",
		ScopesDefault: []string{"openid", "email", "offline_access"},
	},
}

// HasScopes reports whether granted holds every scope of want.
func HasScopes(granted, want []string) bool {
	for _, w := range want {
		if !slices.Contains(granted, w) {
			return false
		}
	}
	return true
}

// MergeScopes is the sorted union of the scope lists, without duplicates.
func MergeScopes(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
