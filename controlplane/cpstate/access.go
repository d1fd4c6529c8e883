package cpstate

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
)

// Access authenticates bearer credentials against the control-plane state
// and decides what a principal may read and change.
type Access struct {
	state         *State
	bootstrapHash string
	jwt           *auth.JWTVerifier
	systemHash    atomic.Value // string
}

// SystemCredential returns a credential, valid for this process only, with
// which the platform itself calls the admin API (its events have source
// SYSTEM). Each call replaces the previous one.
func (a *Access) SystemCredential() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	cred := "sys_" + hex.EncodeToString(b)
	a.systemHash.Store(auth.HashKey(cred))
	return cred
}

// NewAccess returns an Access. bootstrapHash is the hex SHA-256 of the
// platform-admin key; jwt may be nil when no JWT keys are configured.
func NewAccess(state *State, bootstrapHash string, jwt *auth.JWTVerifier) *Access {
	return &Access{state: state, bootstrapHash: bootstrapHash, jwt: jwt}
}

// Authenticate resolves a credential: the bootstrap key, a JWT, or an API
// key that exists and is not disabled (as this instance's mirror of the
// state sees it, milliseconds behind any write). JWTs and API keys fail
// closed with ErrStale (an httpx.StatusError 503) while the mirror is stale.
func (a *Access) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	hash := auth.HashKey(cred)
	if sys, _ := a.systemHash.Load().(string); sys != "" && subtle.ConstantTimeCompare([]byte(hash), []byte(sys)) == 1 {
		return auth.Principal{ID: "system", Type: auth.TypeSystem, DisplayName: "auditrail", PlatformAdmin: true}, nil
	}
	if a.bootstrapHash != "" && subtle.ConstantTimeCompare([]byte(hash), []byte(a.bootstrapHash)) == 1 {
		return auth.Principal{ID: "bootstrap", Type: auth.TypePlatformAdmin, DisplayName: "platform admin", PlatformAdmin: true}, nil
	}
	// API keys and members are decided by the mirror: refuse them (503)
	// rather than trust a mirror that may miss a revocation.
	if err := a.state.Fresh(); err != nil {
		return auth.Principal{}, err
	}
	if auth.LooksLikeJWT(cred) {
		if a.jwt == nil {
			return auth.Principal{}, fmt.Errorf("%w: JWTs are not configured", auth.ErrUnauthenticated)
		}
		sub, err := a.jwt.Verify(cred)
		if err != nil {
			return auth.Principal{}, err
		}
		return auth.Principal{ID: sub, Type: auth.TypeAccount, UserID: sub, DisplayName: sub}, nil
	}
	kvKey, ok := a.state.keyByHash(hash)
	if !ok {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	var k APIKey
	if _, err := a.state.Get(kvKey, &k); err != nil || k.Disabled {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	org := k.OrgID
	if k.Kind == KeyKindService {
		if k.ProjectID == nil {
			return auth.Principal{}, auth.ErrUnauthenticated
		}
		project := *k.ProjectID
		return auth.Principal{ID: k.ID.String(), Type: auth.TypeServiceKey, DisplayName: k.Name, OrgScope: &org, ProjectScope: &project}, nil
	}
	return auth.Principal{ID: k.ID.String(), Type: auth.TypeAPIKey, UserID: k.UserID, DisplayName: k.Name, OrgScope: &org}, nil
}

// Changed returns a channel closed at the next change of the state its
// decisions read (State.Changed).
func (a *Access) Changed() <-chan struct{} { return a.state.Changed() }

// AuthorizeTools allows p to list and run the tools of a project: the
// platform admin, members of the organization and the project, and the
// project's own service keys (CONTRACT.md "Who acts").
func (a *Access) AuthorizeTools(ctx context.Context, p auth.Principal, org, project uuid.UUID) error {
	if p.IsServiceKey() {
		if p.OrgScope != nil && *p.OrgScope == org && p.ProjectScope != nil && *p.ProjectScope == project {
			return nil
		}
		return fmt.Errorf("%w: a service key acts only in its own project", auth.ErrForbidden)
	}
	return a.AuthorizeRead(ctx, p, org, &project)
}

// Role returns p's role in org, if any.
func (a *Access) Role(p auth.Principal, org uuid.UUID) (Role, bool) {
	if p.UserID == "" || !p.InOrg(org) {
		return "", false
	}
	var m Member
	if _, err := a.state.Get(MemberKey(org.String(), p.UserID), &m); err != nil {
		return "", false
	}
	return m.Role, true
}

// AuthorizeRead allows the platform admin everything; others need
// membership of org and, for a project, of the project too (seeds/000).
func (a *Access) AuthorizeRead(_ context.Context, p auth.Principal, org uuid.UUID, project *uuid.UUID) error {
	if p.PlatformAdmin {
		return nil
	}
	if _, ok := a.Role(p, org); !ok {
		return fmt.Errorf("%w: not a member of organization %s", auth.ErrForbidden, org)
	}
	if project != nil {
		var pm ProjectMember
		if _, err := a.state.Get(ProjectMemberKey(org.String(), project.String(), p.UserID), &pm); err != nil {
			return fmt.Errorf("%w: not a member of project %s", auth.ErrForbidden, project)
		}
	}
	return nil
}

// AuthorizeMutate allows the platform admin and the org's owners and admins.
func (a *Access) AuthorizeMutate(p auth.Principal, org uuid.UUID) error {
	if p.PlatformAdmin {
		return nil
	}
	if r, ok := a.Role(p, org); ok && r.CanMutate() {
		return nil
	}
	return fmt.Errorf("%w: only owners and admins of organization %s change it", auth.ErrForbidden, org)
}

// DisplayName is how p appears in audit entries of org: the member's display
// name when there is one.
func (a *Access) DisplayName(p auth.Principal, org uuid.UUID) string {
	if p.UserID != "" {
		var m Member
		if _, err := a.state.Get(MemberKey(org.String(), p.UserID), &m); err == nil && m.DisplayName != "" {
			return m.DisplayName
		}
	}
	if p.DisplayName != "" {
		return p.DisplayName
	}
	return p.ID
}
