package hookproxy

// Requests shaped for servers written to Arcade's public "logic extensions"
// webhook contract: ArcadeAI/schemas, logic_extensions/http/1.0/schema.yaml,
// version 1.1.1-beta. Our own description of the shapes that differ from
// the auditrail contract (schemas/openapi/hooks.yaml, seeds/001):
//
//   - context.secrets is a list of the secret names the tool receives
//     (auditrail: an object, name to true);
//   - context.authorization is a list of {provider_id, oauth2: {scopes}},
//     one per provider the tool needs, with the scopes the user granted
//     (auditrail: an object, provider to {provider_type, connected,
//     scopes});
//   - requirements.secrets in access requests is a list of {name}
//     (auditrail: a list of names).
//
// Everything else (tool, inputs, output, execution fields, metadata,
// requirements.authorization with its oauth2 member) is the same in both.

import (
	"encoding/json"
	"slices"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// Contract is the request shape a hook server is written to. Answers are
// read in both shapes whatever the contract.
type Contract string

// Contracts.
const (
	// ContractAuditrail is seeds/001 as written (the default; "" too).
	ContractAuditrail Contract = "auditrail"
	// ContractArcade shapes requests as Arcade's logic-extensions schema.
	ContractArcade Contract = "arcade"
)

// Valid reports whether c is a known contract ("" is the default).
func (c Contract) Valid() bool {
	return c == "" || c == ContractAuditrail || c == ContractArcade
}

type arcadeOAuth2 struct {
	Scopes []string `json:"scopes"`
}

type arcadeAuthorization struct {
	ProviderID string       `json:"provider_id"`
	OAuth2     arcadeOAuth2 `json:"oauth2"`
}

type arcadeContext struct {
	Authorization []arcadeAuthorization `json:"authorization,omitempty"`
	Secrets       []string              `json:"secrets,omitempty"`
	Metadata      *map[string]any       `json:"metadata,omitempty"`
	UserID        *string               `json:"user_id,omitempty"`
}

type arcadePreRequest struct {
	ExecutionID string         `json:"execution_id"`
	Tool        hooksapi.Tool  `json:"tool"`
	Inputs      map[string]any `json:"inputs"`
	Context     arcadeContext  `json:"context"`
}

type arcadePostRequest struct {
	ExecutionID    string         `json:"execution_id"`
	Tool           hooksapi.Tool  `json:"tool"`
	Inputs         map[string]any `json:"inputs"`
	Success        bool           `json:"success"`
	Output         any            `json:"output,omitempty"`
	ExecutionCode  string         `json:"execution_code"`
	ExecutionError *string        `json:"execution_error,omitempty"`
	Context        arcadeContext  `json:"context"`
}

type arcadeSecret struct {
	Name string `json:"name"`
}

type arcadeRequirements struct {
	Authorization *[]hooksapi.AuthorizationRequirement `json:"authorization,omitempty"`
	Secrets       []arcadeSecret                       `json:"secrets,omitempty"`
}

type arcadeVersionInfo struct {
	Version      string                 `json:"version"`
	Requirements arcadeRequirements     `json:"requirements"`
	Metadata     *hooksapi.ToolMetadata `json:"metadata,omitempty"`
}

type arcadeToolkitInfo struct {
	Tools map[string][]arcadeVersionInfo `json:"tools"`
}

type arcadeAccessRequest struct {
	UserID   string                       `json:"user_id"`
	Toolkits map[string]arcadeToolkitInfo `json:"toolkits"`
}

// arcadeCtx is the context of a pre or post request in Arcade's shape:
// secret names and providers in a stable (sorted) order.
func arcadeCtx(c hooksapi.Context) arcadeContext {
	out := arcadeContext{Metadata: c.Metadata, UserID: c.UserId}
	if c.Secrets != nil {
		for name, on := range *c.Secrets {
			if on {
				out.Secrets = append(out.Secrets, name)
			}
		}
		slices.Sort(out.Secrets)
	}
	if c.Authorization != nil {
		for provider, info := range *c.Authorization {
			a := arcadeAuthorization{ProviderID: provider, OAuth2: arcadeOAuth2{Scopes: []string{}}}
			if info.Scopes != nil {
				a.OAuth2.Scopes = *info.Scopes
			}
			out.Authorization = append(out.Authorization, a)
		}
		slices.SortFunc(out.Authorization, func(a, b arcadeAuthorization) int {
			switch {
			case a.ProviderID < b.ProviderID:
				return -1
			case a.ProviderID > b.ProviderID:
				return 1
			}
			return 0
		})
	}
	return out
}

// preBody encodes a pre request in the hook's contract.
func preBody(h Hook, req hooksapi.PreRequest) ([]byte, error) {
	if h.Contract != ContractArcade {
		return json.Marshal(req)
	}
	return json.Marshal(arcadePreRequest{ExecutionID: req.ExecutionId, Tool: req.Tool, Inputs: orEmpty(req.Inputs), Context: arcadeCtx(req.Context)})
}

// postBody encodes a post request in the hook's contract.
func postBody(h Hook, req hooksapi.PostRequest) ([]byte, error) {
	if h.Contract != ContractArcade {
		return json.Marshal(req)
	}
	return json.Marshal(arcadePostRequest{ExecutionID: req.ExecutionId, Tool: req.Tool, Inputs: orEmpty(req.Inputs), Success: req.Success,
		Output: req.Output, ExecutionCode: req.ExecutionCode, ExecutionError: req.ExecutionError, Context: arcadeCtx(req.Context)})
}

// accessBody encodes an access request in the hook's contract.
func accessBody(h Hook, req hooksapi.AccessRequest) ([]byte, error) {
	if h.Contract != ContractArcade {
		return json.Marshal(req)
	}
	out := arcadeAccessRequest{UserID: req.UserId, Toolkits: make(map[string]arcadeToolkitInfo, len(req.Toolkits))}
	for tk, info := range req.Toolkits {
		ai := arcadeToolkitInfo{Tools: make(map[string][]arcadeVersionInfo, len(info.Tools))}
		for tool, versions := range info.Tools {
			av := make([]arcadeVersionInfo, len(versions))
			for i, v := range versions {
				av[i] = arcadeVersionInfo{Version: v.Version, Metadata: v.Metadata,
					Requirements: arcadeRequirements{Authorization: v.Requirements.Authorization}}
				if v.Requirements.Secrets != nil {
					for _, name := range *v.Requirements.Secrets {
						av[i].Requirements.Secrets = append(av[i].Requirements.Secrets, arcadeSecret{Name: name})
					}
				}
			}
			ai.Tools[tool] = av
		}
		out.Toolkits[tk] = ai
	}
	return json.Marshal(out)
}

// orEmpty: Arcade's schema wants inputs as an object, never null.
func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
