package controlplane

import (
	"fmt"
	"strings"
	"time"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/google/uuid"
)

// ResolvedHook is an enabled hook with its secrets opened, for the hook client.
type ResolvedHook struct {
	ID        uuid.UUID
	ProjectID *uuid.UUID
	Config    cpstate.HookConfig
	// Revision changes with every change of the hook.
	Revision string
}

// EnabledHooks returns the enabled hooks that apply to a project: its
// organization's and its own.
func (s *Service) EnabledHooks(org, project uuid.UUID) ([]ResolvedHook, error) {
	var out []ResolvedHook
	for _, scope := range []string{"org", project.String()} {
		prefix := "hook." + org.String() + "." + scope + "."
		hooks, err := cpstate.ListAs[cpstate.Hook](s.state, prefix)
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

// HookIDs answers the ids of every hook that exists, enabled or not, in
// every organization: the hook client forgets the others.
func (s *Service) HookIDs() (map[string]bool, error) {
	out := map[string]bool{}
	for _, k := range s.state.Keys("hook.") {
		out[k[strings.LastIndexByte(k, '.')+1:]] = true
	}
	return out, nil
}
