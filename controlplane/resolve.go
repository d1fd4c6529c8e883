package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ResolvedHook is an enabled hook with its secrets opened, for the hook client.
type ResolvedHook struct {
	ID        uuid.UUID
	ProjectID *uuid.UUID
	Config    HookConfig
	// Revision changes with every change of the hook.
	Revision string
}

// EnabledHooks returns the enabled hooks that apply to a project: its
// organization's and its own.
func (s *Service) EnabledHooks(org, project uuid.UUID) ([]ResolvedHook, error) {
	var out []ResolvedHook
	for _, scope := range []string{"org", project.String()} {
		prefix := "hook." + org.String() + "." + scope + "."
		hooks, err := listAs[Hook](s.state, prefix)
		if err != nil {
			return nil, err
		}
		for _, h := range hooks {
			if h.Config.Enabled != nil && !*h.Config.Enabled {
				continue
			}
			cfg, err := s.unsealedConfig(prefix+h.ID.String(), h)
			if err != nil {
				return nil, fmt.Errorf("hook %s: %w", h.ID, err)
			}
			out = append(out, ResolvedHook{ID: h.ID, ProjectID: h.ProjectID, Config: cfg, Revision: h.UpdatedAt.Format(time.RFC3339Nano)})
		}
	}
	return out, nil
}

// ErrNotConnected is returned when a user has no connection to a provider.
var ErrNotConnected = errors.New("not connected")

// Token returns a user's access token and granted scopes for a provider.
func (s *Service) Token(org, project, user, provider string) (string, []string, error) {
	key := connKey(org, project, user, provider)
	var u UserConnection
	if _, err := s.state.get(key, &u); err != nil {
		return "", nil, ErrNotConnected
	}
	// An expired access token is still handed over: the tool refreshes it or
	// reports the provider's answer, which says more than "not connected".
	pt, err := s.sealer.Open(key, u.Sealed)
	if err != nil {
		return "", nil, err
	}
	var t ConnectionTokens
	if err := json.Unmarshal(pt, &t); err != nil {
		return "", nil, err
	}
	return t.AccessToken, u.Scopes, nil
}
