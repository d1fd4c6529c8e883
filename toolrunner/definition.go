// Package toolrunner runs tools: a registry of toolkits and their
// definitions, input validation, and the execution pipeline — access check,
// pre hooks, secrets and user connection, the tool under a deadline, post
// hooks — ending in one execution/v1 event per execution.
package toolrunner

import (
	"context"
	"errors"
	"fmt"

	"github.com/auditrail/auditrail/internal/oauthflow"
)

// Parameter and output types of seeds/002.
const (
	TypeString      = "string"
	TypeInteger     = "integer"
	TypeBoolean     = "boolean"
	TypeNumber      = "number"
	TypeJSON        = "json"
	TypeArrayString = "array<string>"
	TypeArrayJSON   = "array<json>"
	TypeArray       = "array"
)

// Param is one named parameter of a tool.
type Param struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Required bool     `json:"required"`
	Default  any      `json:"default"`
	Enum     []string `json:"enum,omitempty"`
	// Minimum and Maximum bound integer parameters.
	Minimum *int64 `json:"minimum,omitempty"`
	Maximum *int64 `json:"maximum,omitempty"`
	// Nullable: an explicit null is a value of its own (Validate keeps
	// it as nil in the inputs instead of putting the default there).
	Nullable    bool   `json:"nullable,omitempty"`
	Description string `json:"description"`
}

// Output describes what a tool returns.
type Output struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// Classification of a tool (seeds/001 tool metadata).
type Classification struct {
	ServiceDomains []string `json:"service_domains,omitempty"`
}

// Behavior of a tool (seeds/001 tool metadata).
type Behavior struct {
	Operations  []string `json:"operations,omitempty"`
	ReadOnly    bool     `json:"read_only"`
	Destructive bool     `json:"destructive"`
	Idempotent  bool     `json:"idempotent"`
	OpenWorld   bool     `json:"open_world"`
}

// Metadata of a tool.
type Metadata struct {
	Classification Classification `json:"classification"`
	Behavior       Behavior       `json:"behavior"`
	Extras         map[string]any `json:"extras,omitempty"`
}

// AuthRequirement is an authorization a tool needs from its user.
type AuthRequirement struct {
	ProviderType string   `json:"provider_type"`
	ProviderID   string   `json:"provider_id"`
	Scopes       []string `json:"scopes,omitempty"`
}

// SecretRequirement is a project secret a tool needs.
type SecretRequirement struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Optional: the runner passes the secret when the project has it and
	// runs the tool without it (no SECRET_MISSING) when it does not.
	Optional bool `json:"optional,omitempty"`
}

// Requirements of a tool.
type Requirements struct {
	Authorization []AuthRequirement   `json:"authorization"`
	Secrets       []SecretRequirement `json:"secrets"`
}

// Definition describes a tool (CONTRACT.md "Tool runner API").
type Definition struct {
	Toolkit      string       `json:"toolkit"`
	Name         string       `json:"name"`
	Version      string       `json:"version"`
	Description  string       `json:"description"`
	Parameters   []Param      `json:"parameters"`
	Output       Output       `json:"output"`
	Metadata     Metadata     `json:"metadata"`
	Requirements Requirements `json:"requirements"`
	Deprecated   bool         `json:"deprecated"`
}

// FullyQualifiedName is Toolkit.Name.
func (d Definition) FullyQualifiedName() string { return d.Toolkit + "." + d.Name }

// Tool is something the runner can run.
type Tool interface {
	Definition() Definition
	// Run executes the tool. Errors should be *Error to say whether a retry
	// may succeed; any other error is reported as a runtime error.
	Run(ctx context.Context, call Call) (any, error)
}

// Call is what a tool receives.
type Call struct {
	// Inputs, validated and completed with defaults.
	Inputs map[string]any
	// Secrets by name (the tool's requirements, hook overrides applied).
	Secrets map[string]string
	// Tokens by authorization provider id: the access tokens of the user's
	// connections (each holding every scope the tool requires).
	Tokens map[string]string
	// Connections by authorization provider id: the same connections with
	// their granted scopes and expiry; nil for a tool that needs none.
	Connections map[string]oauthflow.Connection
	UserID      string
	// Org and Project are the execution's tenant (the runner fills them
	// from its Scope).
	Org, Project string
}

// Error kinds of an execution.
const (
	KindInputInvalid  = "TOOL_INPUT_INVALID"
	KindRuntime       = "TOOL_RUNTIME_ERROR"
	KindTimeout       = "TOOL_TIMEOUT"
	KindUpstream      = "UPSTREAM_ERROR"
	KindNotFound      = "NOT_FOUND"
	KindSecretMissing = "SECRET_MISSING"
	// KindAuthorization: the user has no usable connection to a provider
	// the tool needs, or it lacks a scope; the result's authorization says
	// how to grant it. Can retry.
	KindAuthorization = "AUTHORIZATION_REQUIRED"
	// KindAuthProviderNotConfigured: the organization has no auth provider
	// of the id the tool needs.
	KindAuthProviderNotConfigured = "AUTH_PROVIDER_NOT_CONFIGURED"
	// KindAuthorizationFailed: the connection could not be used now (the
	// provider unreachable during a refresh). Can retry.
	KindAuthorizationFailed = "AUTHORIZATION_FAILED"
	KindHookCheck           = "HOOK_CHECK_FAILED"
	KindHookRateLimits      = "HOOK_RATE_LIMITED"
)

// Error is a tool failure as the API reports it.
type Error struct {
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	CanRetry bool   `json:"can_retry"`
}

func (e *Error) Error() string { return e.Kind + ": " + e.Message }

// Errorf returns an *Error.
func Errorf(kind string, canRetry bool, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), CanRetry: canRetry}
}

// AsError turns any error of a tool into an *Error.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Errorf(KindTimeout, true, "the tool did not finish in time")
	}
	return Errorf(KindRuntime, false, "%v", err)
}
