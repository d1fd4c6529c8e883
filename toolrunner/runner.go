package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// Hooks is the hook client the runner needs (hookproxy.Proxy).
type Hooks interface {
	Access(ctx context.Context, hooks []hookproxy.Hook, userID string, catalog map[string]hooksapi.ToolkitInfo) hookproxy.AccessDecision
	Pre(ctx context.Context, hooks []hookproxy.Hook, req hooksapi.PreRequest) hookproxy.PreResult
	Post(ctx context.Context, hooks []hookproxy.Hook, req hooksapi.PostRequest) hookproxy.PostResult
}

// HookSource lists the enabled hooks of a project (its org's and its own).
type HookSource interface {
	Hooks(ctx context.Context, org, project uuid.UUID) ([]hookproxy.Hook, error)
}

// SecretSource returns a project secret's value; an error wrapping a not-found
// error when there is none.
type SecretSource interface {
	SecretValue(org, project, name string) (string, error)
}

// ConnectionSource is the users' connections to the organizations' auth
// providers (the control plane; see internal/oauthflow).
type ConnectionSource interface {
	// Connection returns the user's usable connection, refreshed first when
	// its access token expires within 60 s (once for concurrent callers, the
	// new token persisted for every instance). An error wrapping
	// oauthflow.ErrNotConnected when there is none, it is broken, or the
	// provider refused the refresh; oauthflow.ErrNoProvider when the
	// organization has no such provider; anything else (the provider
	// unreachable) is transient.
	Connection(ctx context.Context, org, project, user, provider string) (oauthflow.Connection, error)
	// ConnectionStatus reports the stored connection without refreshing it;
	// it never fails.
	ConnectionStatus(org, project, user, provider string) (connected bool, scopes []string)
	// AuthorizationURL makes the link that starts the authorization-code
	// flow for the user, asking for scopes merged with what the user
	// already granted; an error wrapping oauthflow.ErrNoProvider when the
	// organization has no such provider. The link is for the user
	// themself (the control plane's needs a browser signed in as the
	// user); it is handed to the caller only, never logged nor recorded.
	AuthorizationURL(ctx context.Context, org, project, user, provider string, scopes []string) (url string, stateExpiresAt time.Time, err error)
}

// AppLinks is a ConnectionSource that makes links for an application
// acting for its end users (a project's service key), who have no platform
// credentials: AppAuthorizationURL is AuthorizationURL without the need of
// the user's platform session; the application answers for who opens the
// link. The runner uses it for executions asked by a service key.
type AppLinks interface {
	AppAuthorizationURL(ctx context.Context, org, project, user, provider string, scopes []string) (url string, stateExpiresAt time.Time, err error)
}

// EventPublisher stores an event in the stream.
type EventPublisher interface {
	Publish(ctx context.Context, ev producers.Event) error
}

// Config tunes a Runner.
type Config struct {
	// ToolTimeout bounds one tool run.
	ToolTimeout time.Duration
	// AccessCacheTTL keeps access decisions per user; a hook configuration
	// change invalidates them at once.
	AccessCacheTTL time.Duration
	// PublishTimeout bounds publishing the execution event.
	PublishTimeout time.Duration
}

// DefaultConfig: 60 s per tool, access decisions kept 10 s, 5 s to publish.
func DefaultConfig() Config {
	return Config{ToolTimeout: 60 * time.Second, AccessCacheTTL: 10 * time.Second, PublishTimeout: 5 * time.Second}
}

// Runner executes tools.
type Runner struct {
	cfg     Config
	reg     *Registry
	hooks   Hooks
	source  HookSource
	secrets SecretSource
	conns   ConnectionSource
	pub     EventPublisher
	access  *hookproxy.AccessCache
	log     *slog.Logger
	now     func() time.Time
	obs     Observer // nil: none
}

// Observer counts executions (metrics.Registry implements it): toolkit is
// a registered toolkit, outcome OK or the error kind (bounded sets).
type Observer interface {
	ToolExecution(toolkit, outcome string, d time.Duration)
}

// ObserveWith reports every execution to o; call it before serving.
func (r *Runner) ObserveWith(o Observer) { r.obs = o }

// New returns a runner.
func New(cfg Config, reg *Registry, hooks Hooks, source HookSource, secrets SecretSource, conns ConnectionSource, pub EventPublisher, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.Default()
	}
	return &Runner{cfg: cfg, reg: reg, hooks: hooks, source: source, secrets: secrets, conns: conns, pub: pub,
		access: hookproxy.NewAccessCache(cfg.AccessCacheTTL), log: log, now: time.Now}
}

// Scope names an execution's tenant, the end user it runs for (whose
// connections it uses) and who asked for it.
type Scope struct {
	Org, Project uuid.UUID
	UserID       string
	Actor        Actor
}

// Actor is the principal that asked for an execution, as recorded.
type Actor struct {
	PrincipalID, PrincipalType, DisplayName, ClientIP string
	// Client is the client program as it names itself (an MCP client's
	// clientInfo); nil for the HTTP API.
	Client *schemas.ClientInfo
}

// Result is the outcome of an execution (CONTRACT.md).
type Result struct {
	ExecutionID string             `json:"execution_id"`
	ToolName    string             `json:"tool_name"`
	Success     bool               `json:"success"`
	Output      any                `json:"output,omitempty"`
	Error       *Error             `json:"error,omitempty"`
	DurationMS  float64            `json:"duration_ms"`
	Hooks       []schemas.HookCall `json:"hooks"`
	// Authorization tells the caller how the user grants what the tool
	// needs (error kind AUTHORIZATION_REQUIRED only). It goes to the caller
	// and nowhere else: not in the event, not in a log line.
	Authorization *AuthorizationRequest   `json:"authorization,omitempty"`
	Event         *schemas.ExecutionEvent `json:"-"`
	// Recorded is true once the execution event is stored in the stream or
	// kept in the outbox.
	Recorded bool `json:"-"`
}

// metadataJSON turns tool metadata into the contract's optional shape:
// members left out when empty.
func metadataJSON(m Metadata) *hooksapi.ToolMetadata {
	out := &hooksapi.ToolMetadata{}
	if len(m.Classification.ServiceDomains) > 0 {
		sd := m.Classification.ServiceDomains
		out.Classification = &hooksapi.ToolClassification{ServiceDomains: &sd}
	}
	b := m.Behavior
	if len(b.Operations) > 0 || b.ReadOnly || b.Destructive || b.Idempotent || b.OpenWorld {
		beh := &hooksapi.ToolBehavior{}
		if len(b.Operations) > 0 {
			ops := b.Operations
			beh.Operations = &ops
		}
		t := true
		if b.ReadOnly {
			beh.ReadOnly = &t
		}
		if b.Destructive {
			beh.Destructive = &t
		}
		if b.Idempotent {
			beh.Idempotent = &t
		}
		if b.OpenWorld {
			beh.OpenWorld = &t
		}
		out.Behavior = beh
	}
	if len(m.Extras) > 0 {
		ex := m.Extras
		out.Extras = &ex
	}
	if out.Classification == nil && out.Behavior == nil && out.Extras == nil {
		return nil
	}
	return out
}

func toolJSON(d Definition) hooksapi.Tool {
	return hooksapi.Tool{Name: d.Name, Toolkit: d.Toolkit, Version: d.Version, Metadata: metadataJSON(d.Metadata)}
}

func requirementsJSON(r Requirements) hooksapi.Requirements {
	out := hooksapi.Requirements{}
	if len(r.Authorization) > 0 {
		auth := make([]hooksapi.AuthorizationRequirement, len(r.Authorization))
		for i, a := range r.Authorization {
			a := a
			auth[i] = hooksapi.AuthorizationRequirement{ProviderType: a.ProviderType}
			if a.ProviderID != "" {
				auth[i].ProviderId = &a.ProviderID
			}
			if len(a.Scopes) > 0 {
				// Beside scopes, oauth2.scopes: where servers written to
				// Arcade's schema read them (both contracts).
				auth[i].Scopes = &a.Scopes
				auth[i].Oauth2 = &hooksapi.OAuth2Scopes{Scopes: &a.Scopes}
			}
		}
		out.Authorization = &auth
	}
	if len(r.Secrets) > 0 {
		names := make([]string, len(r.Secrets))
		for i, s := range r.Secrets {
			names[i] = s.Name
		}
		out.Secrets = &names
	}
	return out
}

// Visible returns the definitions that the access hooks leave visible to the user.
func (r *Runner) Visible(ctx context.Context, sc Scope) ([]Definition, []schemas.HookCall, error) {
	hooks, err := r.source.Hooks(ctx, sc.Org, sc.Project)
	if err != nil {
		return nil, nil, fmt.Errorf("hooks: %w", err)
	}
	dec, cached := r.visible(ctx, sc, hooks)
	var out []Definition
	for _, d := range r.reg.Definitions() {
		if dec.Visible == nil || dec.Visible[d.Toolkit][d.Name] {
			out = append(out, d)
		}
	}
	return out, dec.Record("", "", cached), nil
}

// ListRevision names what the tool list of the project's users depends on
// besides the access hooks' answers: the registered definitions and the
// project's access hooks (ids and revisions, in their order). It changes
// when a registration or an access hook configuration does; it calls no
// hook.
func (r *Runner) ListRevision(ctx context.Context, org, project uuid.UUID) (string, error) {
	hooks, err := r.source.Hooks(ctx, org, project)
	if err != nil {
		return "", fmt.Errorf("hooks: %w", err)
	}
	sig, _ := accessSignature(hooks)
	defs := r.reg.Definitions()
	var b strings.Builder
	fmt.Fprintf(&b, "%d/", len(defs))
	for _, d := range defs {
		b.WriteString(d.FullyQualifiedName() + "@" + d.Version + ",")
	}
	return b.String() + "/" + sig, nil
}

// accessSignature is the ids and revisions of the access hooks in their
// order; false when there is none.
func accessSignature(hooks []hookproxy.Hook) (string, bool) {
	var sig strings.Builder
	any := false
	for _, h := range hookproxy.Order(hooks) {
		if _, ok := h.Points[hookproxy.Access]; ok {
			any = true
			sig.WriteString(h.ID + "@" + h.Revision + ",")
		}
	}
	return sig.String(), any
}

// visible returns the access hooks' decision (a nil Visible: everything,
// no access hook) and whether it came from the cache.
func (r *Runner) visible(ctx context.Context, sc Scope, hooks []hookproxy.Hook) (hookproxy.AccessDecision, bool) {
	sig, any := accessSignature(hooks)
	if !any {
		return hookproxy.AccessDecision{}, false
	}
	key := sc.Org.String() + "/" + sc.Project.String() + "/" + sc.UserID + "/" + sig
	if d, ok := r.access.Get(key); ok {
		return d, true
	}
	catalog := map[string]hooksapi.ToolkitInfo{}
	for _, d := range r.reg.Definitions() {
		info, ok := catalog[d.Toolkit]
		if !ok {
			info = hooksapi.ToolkitInfo{Tools: map[string][]hooksapi.VersionInfo{}}
			catalog[d.Toolkit] = info
		}
		info.Tools[d.Name] = append(info.Tools[d.Name], hooksapi.VersionInfo{Version: d.Version, Requirements: requirementsJSON(d.Requirements), Metadata: metadataJSON(d.Metadata)})
	}
	d := r.hooks.Access(ctx, hooks, sc.UserID, catalog)
	r.access.Put(key, d)
	return d, false
}

// Execute runs one tool through the pipeline and publishes its execution
// event. Errors are returned only for an unknown tool (ErrUnknownTool),
// invalid input (ErrInvalidInput) or when the hooks cannot be listed; every
// other failure is a Result with Success false.
func (r *Runner) Execute(ctx context.Context, sc Scope, toolName string, input map[string]any) (res Result, err error) {
	tool, err := r.reg.Lookup(toolName)
	if err != nil {
		return Result{}, err
	}
	def := tool.Definition()
	inputs, err := Validate(def, input)
	if err != nil {
		return Result{}, err
	}
	hooks, err := r.source.Hooks(ctx, sc.Org, sc.Project)
	if err != nil {
		return Result{}, fmt.Errorf("hooks: %w", err)
	}
	start := r.now()
	res = Result{ExecutionID: uuid.Must(uuid.NewV7()).String(), ToolName: def.FullyQualifiedName()}
	code := "OK"
	// Every execution that got this far is published, whatever its outcome;
	// res is a named result so that the duration reaches the caller.
	defer func() {
		res.DurationMS = float64(r.now().Sub(start).Microseconds()) / 1000
		r.publish(ctx, sc, def, start, code, &res)
	}()
	fail := func(e *Error, c string) (Result, error) {
		res.Success, res.Error, res.Output, code = false, e, nil, c
		return res, nil
	}

	// Access: the record names the hook that hid the tool, and says
	// whether the decision came from the cache (no call made now).
	dec, cached := r.visible(ctx, sc, hooks)
	res.Hooks = append(res.Hooks, dec.Record(def.Toolkit, def.Name, cached)...)
	if dec.Visible != nil && !dec.Visible[def.Toolkit][def.Name] {
		by, _ := dec.HiddenBy(def.Toolkit, def.Name)
		return fail(Errorf(KindHookCheck, false, "%s is not available to user %s (access hook %s)", def.FullyQualifiedName(), sc.UserID, by), KindHookCheck)
	}

	// The user's connections are looked up before the pre hook, once per
	// provider, so that the hooks see them (context.authorization) and the
	// tool gets the very connection the hooks were told about. The pre hook
	// runs even when a connection is missing, and its denial wins: a
	// policy refusal is not turned into a consent screen, and no
	// authorization URL (a state) is issued for an execution a hook refuses.
	// AUTHORIZATION_REQUIRED is decided after the pre hook and the secrets;
	// the tool and the post hook do not run then.
	grants := r.connections(ctx, sc, def)

	// Pre hooks; the context they and the post hooks get is built only
	// when some hook will receive it.
	var hctx hooksapi.Context
	if hasPrePost(hooks) {
		hctx = r.hookContext(sc, def, grants)
	}
	pre := r.hooks.Pre(ctx, hooks, hooksapi.PreRequest{ExecutionId: res.ExecutionID, Tool: toolJSON(def), Inputs: inputs, Context: hctx})
	res.Hooks = append(res.Hooks, pre.Calls...)
	if !pre.Allowed {
		return fail(&Error{Kind: pre.Kind, Message: pre.Message, CanRetry: pre.Kind == KindHookRateLimits}, pre.Kind)
	}
	if inputs, err = Validate(def, pre.Inputs); err != nil {
		return fail(Errorf(KindInputInvalid, false, "inputs overridden by a pre hook do not fit the tool: %v", err), KindInputInvalid)
	}

	// Secrets, then the user's connections.
	call := Call{Inputs: inputs, Secrets: map[string]string{}, Tokens: make(map[string]string, len(grants)), UserID: sc.UserID,
		Org: sc.Org.String(), Project: sc.Project.String()}
	for _, s := range def.Requirements.Secrets {
		if v, ok := pre.Secrets[s.Name]; ok {
			call.Secrets[s.Name] = v
			continue
		}
		v, err := r.secrets.SecretValue(sc.Org.String(), sc.Project.String(), s.Name)
		if err != nil && s.Optional {
			continue // the tool runs without it
		}
		if err != nil {
			return fail(Errorf(KindSecretMissing, false, "the project has no secret %s, which %s requires", s.Name, def.FullyQualifiedName()), KindSecretMissing)
		}
		call.Secrets[s.Name] = v
	}
	if e, ar := r.authorize(ctx, sc, def, grants); e != nil {
		res.Authorization = ar
		return fail(e, e.Kind)
	}
	if len(grants) > 0 {
		call.Connections = make(map[string]oauthflow.Connection, len(grants))
		for _, g := range grants {
			call.Tokens[g.provider], call.Connections[g.provider] = g.conn.AccessToken, g.conn
		}
	}

	// The tool, under its deadline.
	tctx, cancel := context.WithTimeout(ctx, r.cfg.ToolTimeout)
	output, runErr := runSafely(tctx, tool, call, r.log)
	cancel()
	success := runErr == nil
	var toolErr *Error
	if runErr != nil {
		toolErr = AsError(runErr)
		if errors.Is(tctx.Err(), context.DeadlineExceeded) {
			toolErr = Errorf(KindTimeout, true, "%s did not finish within %s", def.FullyQualifiedName(), r.cfg.ToolTimeout)
		}
	}

	// Post hooks.
	post := hooksapi.PostRequest{ExecutionId: res.ExecutionID, Tool: toolJSON(def), Inputs: inputs, Success: success,
		Output: output, ExecutionCode: "OK", Context: hctx}
	if toolErr != nil {
		post.ExecutionCode = toolErr.Kind
		post.ExecutionError = &toolErr.Message
	}
	pr := r.hooks.Post(ctx, hooks, post)
	res.Hooks = append(res.Hooks, pr.Calls...)
	if !pr.Allowed {
		return fail(&Error{Kind: pr.Kind, Message: pr.Message, CanRetry: pr.Kind == KindHookRateLimits}, pr.Kind)
	}
	if toolErr != nil {
		return fail(toolErr, toolErr.Kind)
	}
	res.Success, res.Output = true, pr.Output
	return res, nil
}

// hasPrePost: some hook is called before or after the tool.
func hasPrePost(hooks []hookproxy.Hook) bool {
	for _, h := range hooks {
		_, pre := h.Points[hookproxy.Pre]
		_, post := h.Points[hookproxy.Post]
		if pre || post {
			return true
		}
	}
	return false
}

// runSafely runs the tool, turning a panic into a runtime error.
func runSafely(ctx context.Context, tool Tool, call Call, log *slog.Logger) (out any, err error) {
	err = Safely(log, func() error {
		var runErr error
		out, runErr = tool.Run(ctx, call)
		return runErr
	})
	return out, err
}

// Safely runs f and turns a panic in it into a runtime error (KindRuntime)
// of the tool call; the panic and its stack go to log only (nil:
// slog.Default()). The runner
// runs every tool through it, and every goroutine a tool starts must run
// its work through it too: a panic in a goroutine cannot be recovered by
// anyone else and ends the process, so that a hostile provider answer
// would cost every call in flight instead of one.
func Safely(log *slog.Logger, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if log == nil {
				log = slog.Default()
			}
			log.Error("tool panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = Errorf(KindRuntime, false, "the tool failed unexpectedly: %v", p)
		}
	}()
	return f()
}

// hookContext is the context object of pre and post requests: secret names
// (never values), authorization providers with the user's grants (never
// tokens), the tenant and the user.
func (r *Runner) hookContext(sc Scope, def Definition, grants []grant) hooksapi.Context {
	user := sc.UserID
	meta := map[string]any{"organization_id": sc.Org.String(), "project_id": sc.Project.String()}
	c := hooksapi.Context{UserId: &user, Metadata: &meta}
	if len(def.Requirements.Secrets) > 0 {
		names := map[string]bool{}
		for _, s := range def.Requirements.Secrets {
			names[s.Name] = true
		}
		c.Secrets = &names
	}
	if len(grants) > 0 {
		auth := r.hookAuthorization(sc, grants)
		c.Authorization = &auth
	}
	return c
}

func (r *Runner) publish(ctx context.Context, sc Scope, def Definition, start time.Time, code string, res *Result) {
	ev := &schemas.ExecutionEvent{
		EventID: res.ExecutionID, ExecutionID: res.ExecutionID, OrganizationID: sc.Org.String(), ProjectID: sc.Project.String(),
		UserID: sc.UserID, PrincipalID: sc.Actor.PrincipalID, PrincipalType: sc.Actor.PrincipalType,
		DisplayName: sc.Actor.DisplayName, ClientIP: sc.Actor.ClientIP, Tool: schemas.ToolRef{Toolkit: def.Toolkit, Name: def.Name, Version: def.Version},
		StartedAt: start.UTC(), EndedAt: r.now().UTC(), DurationMS: res.DurationMS, Success: res.Success,
		ExecutionCode: code, Hooks: res.Hooks, Client: sc.Actor.Client,
	}
	if res.Error != nil {
		ev.ExecutionError, ev.ErrorKind = res.Error.Message, res.Error.Kind
	}
	if ev.Hooks == nil {
		ev.Hooks = []schemas.HookCall{}
		res.Hooks = ev.Hooks
	}
	res.Event = ev
	if r.obs != nil {
		r.obs.ToolExecution(def.Toolkit, code, ev.EndedAt.Sub(start))
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	defer cancel()
	err := r.pub.Publish(pctx, ev)
	res.Recorded = err == nil
	if err != nil {
		// With the outbox (cmd wires producers.Outbox) this means that
		// neither the stream nor the local disk took the event.
		r.log.Error("execution event LOST: neither published nor kept", "execution_id", res.ExecutionID, "tool", res.ToolName, "err", err)
	}
}
