// Package auth is who a caller is: the principal behind a bearer credential
// (the bootstrap platform-admin key, an API key, or a JWT), and the errors
// that the HTTP layers turn into 401 and 403.
package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/google/uuid"
)

// Errors of authentication and authorization.
var (
	ErrUnauthenticated = errors.New("missing or invalid credentials")
	ErrForbidden       = errors.New("not allowed")
)

// Principal types as they appear in audit entries.
const (
	TypePlatformAdmin = "PLATFORM_ADMIN"
	TypeAPIKey        = "API_KEY"
	TypeAccount       = "ACCOUNT"
	// TypeServiceKey is a project's service key: it acts as no user of its
	// own and names, per tool call, the end user it acts for.
	TypeServiceKey = "SERVICE_KEY"
	// TypeSystem is the platform acting on its own (the demo set-up).
	TypeSystem = "SYSTEM"
)

// Principal is an authenticated caller.
type Principal struct {
	// ID identifies the credential: the API key id, the JWT subject, or "bootstrap".
	ID string
	// Type is PLATFORM_ADMIN, API_KEY, ACCOUNT, SERVICE_KEY or SYSTEM.
	Type string
	// UserID is the user the caller acts as ("" for the platform admin and
	// for service keys, which act for the end user each call names).
	UserID string
	// DisplayName is a human-readable identity.
	DisplayName string
	// OrgScope, when set, confines the caller to one organization (API keys).
	OrgScope *uuid.UUID
	// ProjectScope, when set, confines the caller to one project (service
	// keys): it may use that project's tools and nothing else.
	ProjectScope *uuid.UUID
	// PlatformAdmin is allowed everywhere and a member of nothing.
	PlatformAdmin bool
}

// InOrg reports whether the credential may act in org at all.
func (p Principal) InOrg(org uuid.UUID) bool {
	return p.PlatformAdmin || p.OrgScope == nil || *p.OrgScope == org
}

// IsServiceKey reports whether p is a project service key.
func (p Principal) IsServiceKey() bool { return p.Type == TypeServiceKey }

// HashKey returns the hex SHA-256 of an API key, the only form stored.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}
