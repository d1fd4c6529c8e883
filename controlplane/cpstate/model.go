// Package cpstate is the control plane's state without its admin API:
// the model (organizations, projects, members, API keys, hook
// configurations, secrets, user connections, stream credentials), the
// mirror of the NATS KV bucket that holds it (State), the authentication
// and authorization it decides (Access), the sealer of its secrets, and
// the reader of the push destinations. The admin API (controlplane), the
// delivery role, the query service and the tools import it without an
// HTTP framework.
package cpstate

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Sentinel errors; the HTTP layer maps them to status codes.
var (
	ErrNotFound   = errors.New("not found")
	ErrConflict   = errors.New("conflict")
	ErrInvalid    = errors.New("invalid")
	ErrForbidden  = errors.New("forbidden")
	ErrUnavailabe = errors.New("control plane state unavailable")
)

// Invalid returns an error wrapping ErrInvalid that names field.
func Invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// Role of an organization or project member.
type Role string

// Roles: owners and admins mutate their org, members read.
const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// CanMutate reports whether the role may change its organization.
func (r Role) CanMutate() bool { return r == RoleOwner || r == RoleAdmin }

func ParseRole(field, s string, allowOwner bool) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleMember:
		return r, nil
	case RoleOwner:
		if allowOwner {
			return r, nil
		}
	}
	if allowOwner {
		return "", Invalid(field, "%q is not one of owner, admin, member", s)
	}
	return "", Invalid(field, "%q is not one of admin, member", s)
}

// Org is an organization.
type Org struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Project belongs to an organization.
type Project struct {
	ID        uuid.UUID `json:"id"`
	OrgID     uuid.UUID `json:"organization_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Member is a user's membership of an organization.
type Member struct {
	OrgID       uuid.UUID `json:"organization_id"`
	UserID      string    `json:"user_id"`
	Role        Role      `json:"role"`
	DisplayName string    `json:"display_name"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// ProjectMember is a user's membership of a project.
type ProjectMember struct {
	OrgID     uuid.UUID `json:"organization_id"`
	ProjectID uuid.UUID `json:"project_id"`
	UserID    string    `json:"user_id"`
	Role      Role      `json:"role"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Kinds of API keys.
const (
	// KeyKindUser authenticates as its user (UserID) within the organization.
	KeyKindUser = "user"
	// KeyKindService belongs to a project (ProjectID) and acts for the end
	// users its caller names on each tool call (CONTRACT.md "Who acts").
	KeyKindService = "service"
)

// APIKey authenticates as UserID within OrgID (kind user), or as a service
// of ProjectID (kind service). Only the SHA-256 of the key is stored.
type APIKey struct {
	ID        uuid.UUID  `json:"id"`
	OrgID     uuid.UUID  `json:"organization_id"`
	Kind      string     `json:"kind"`
	ProjectID *uuid.UUID `json:"project_id,omitempty"`
	UserID    string     `json:"user_id,omitempty"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Hash      string     `json:"hash,omitempty"`
	Disabled  bool       `json:"disabled"`
	CreatedAt time.Time  `json:"created_at"`
}

// Public returns the key without its hash.
func (k APIKey) Public() APIKey {
	k.Hash = ""
	if k.Kind == "" {
		k.Kind = KeyKindUser // keys stored before kinds existed
	}
	return k
}

// Secret is a project secret; Value is encrypted at rest and never returned.
type Secret struct {
	OrgID     uuid.UUID `json:"organization_id"`
	ProjectID uuid.UUID `json:"project_id"`
	Name      string    `json:"name"`
	Sealed    []byte    `json:"sealed,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Statuses of a UserConnection.
const (
	// ConnStatusConnected: usable (refreshed first when it expires soon).
	ConnStatusConnected = "connected"
	// ConnStatusBroken: the provider refused its refresh (invalid_grant);
	// the user must authorize again.
	ConnStatusBroken = "broken"
)

// UserConnection is a user's OAuth tokens for a provider in a project;
// the tokens are encrypted at rest and never returned.
type UserConnection struct {
	OrgID     uuid.UUID  `json:"organization_id"`
	ProjectID uuid.UUID  `json:"project_id"`
	UserID    string     `json:"user_id"`
	Provider  string     `json:"provider"`
	Scopes    []string   `json:"scopes"`
	ExpiresAt *time.Time `json:"expires_at"`
	// Status is connected or broken; empty (stored before statuses
	// existed) is connected.
	Status string `json:"status,omitempty"`
	// Account is who the user is at the provider (its userinfo), when known.
	Account   *ConnectionAccount `json:"account,omitempty"`
	Sealed    []byte             `json:"sealed,omitempty"`
	UpdatedAt time.Time          `json:"updated_at"`
}

// Broken reports whether the connection needs a new authorization.
func (u UserConnection) Broken() bool { return u.Status == ConnStatusBroken }

// ConnectionAccount is the provider's account of a connection.
type ConnectionAccount struct {
	Subject string `json:"subject,omitempty"`
	Email   string `json:"email,omitempty"`
	Name    string `json:"name,omitempty"`
}

// AuthProvider is an organization's OAuth 2.0 client at a provider; its
// client secret is sealed and never returned.
type AuthProvider struct {
	ID            string    `json:"id"`
	OrgID         uuid.UUID `json:"organization_id"`
	Type          string    `json:"type"`
	ClientID      string    `json:"client_id"`
	SealedSecret  []byte    `json:"sealed_secret,omitempty"`
	AuthorizeURL  string    `json:"authorize_url"`
	TokenURL      string    `json:"token_url"`
	RevokeURL     string    `json:"revoke_url"`
	UserinfoURL   string    `json:"userinfo_url"`
	APIBaseURL    string    `json:"api_base_url"`
	ScopesDefault []string  `json:"scopes_default"`
	// PickerAPIKey is the browser API key the file picker page gives the
	// Google Picker; it is not a secret (every page holds it).
	PickerAPIKey string    `json:"picker_api_key,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// ConnectionTokens are the sealed part of a UserConnection.
type ConnectionTokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}
