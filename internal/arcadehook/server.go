package arcadehook

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// ErrInvalidPolicy is returned by Policy.Validate.
var ErrInvalidPolicy = errors.New("invalid arcade hook policy")

// MaxRequestBytes bounds a request body the server reads.
const MaxRequestBytes = 4 << 20

// Policy decides the server's answers. Tools are named "Toolkit.Tool";
// in Hide and Only also "Toolkit.Tool@version" (that version only) and
// "Toolkit" (the whole toolkit).
type Policy struct {
	// Access. Only, when set, is answered as `only` (just these tools stay
	// visible); otherwise Hide and HideDestructive are answered as `deny`.
	Only            []string `json:"only,omitempty"`
	Hide            []string `json:"hide,omitempty"`
	HideDestructive bool     `json:"hide_destructive,omitempty"`
	// Pre. Deny and RateLimit map a tool to the error_message of a
	// CHECK_FAILED or RATE_LIMIT_EXCEEDED answer; Inputs are set over the
	// request's inputs (override.inputs is the result); Secrets is answered
	// as override.secrets, an array of maps applied in order.
	Deny      map[string]string              `json:"deny,omitempty"`
	RateLimit map[string]string              `json:"rate_limit,omitempty"`
	Inputs    map[string]map[string]any      `json:"inputs,omitempty"`
	Secrets   map[string][]map[string]string `json:"secrets,omitempty"`
	// Post. DenyOutput maps a tool to the error_message of a CHECK_FAILED
	// answer; Output replaces the tool's output (override.output).
	DenyOutput map[string]string `json:"deny_output,omitempty"`
	Output     map[string]any    `json:"output,omitempty"`
	// Health is what GET /health answers ("" = healthy); unhealthy is
	// answered with 503.
	Health HealthResponseStatus `json:"health,omitempty"`
}

// Validate checks the tool names and the health status.
func (p Policy) Validate() error {
	for _, n := range append(slices.Clone(p.Only), p.Hide...) {
		name, ver, versioned := strings.Cut(n, "@")
		if name == "" || (versioned && (ver == "" || !fqnOK(name))) || (!versioned && !fqnOK(name) && strings.Contains(name, ".")) {
			return fmt.Errorf("%w: %q is not Toolkit, Toolkit.Tool or Toolkit.Tool@version", ErrInvalidPolicy, n)
		}
	}
	for _, m := range []map[string]string{p.Deny, p.RateLimit, p.DenyOutput} {
		for n := range m {
			if !fqnOK(n) {
				return fmt.Errorf("%w: %q is not Toolkit.Tool", ErrInvalidPolicy, n)
			}
		}
	}
	for _, n := range slices.Concat(slices.Collect(maps.Keys(p.Inputs)), slices.Collect(maps.Keys(p.Secrets)), slices.Collect(maps.Keys(p.Output))) {
		if !fqnOK(n) {
			return fmt.Errorf("%w: %q is not Toolkit.Tool", ErrInvalidPolicy, n)
		}
	}
	if p.Health != "" && !p.Health.Valid() {
		return fmt.Errorf("%w: health %q is not healthy, degraded or unhealthy", ErrInvalidPolicy, p.Health)
	}
	return nil
}

func fqnOK(n string) bool {
	tk, tool, ok := strings.Cut(n, ".")
	return ok && tk != "" && tool != "" && !strings.ContainsAny(tool, ".@")
}

// Config configures a Server.
type Config struct {
	// Token is the bearer token every hook operation requires ("" = none,
	// for a server behind mTLS only).
	Token  string
	Policy Policy
	// Middlewares wrap each operation outside the bearer check and the
	// validation (the last one outermost), so that they see every request
	// of a route, refused ones included; tests record exchanges here.
	Middlewares []MiddlewareFunc
}

// Validate checks the policy.
func (c Config) Validate() error { return c.Policy.Validate() }

// Server implements the generated ServerInterface from a Policy.
type Server struct {
	cfg    Config
	log    *slog.Logger
	spec   *openapi3.T
	router routers.Router

	mu     sync.Mutex
	policy Policy
}

var _ ServerInterface = (*Server)(nil)

// New returns a server; the OpenAPI description it validates requests
// against is the one it was generated from.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	spec, err := GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("arcadehook: description: %w", err)
	}
	spec.Servers = nil // any host
	router, err := gorillamux.NewRouter(spec)
	if err != nil {
		return nil, fmt.Errorf("arcadehook: router: %w", err)
	}
	return &Server{cfg: cfg, log: log, spec: spec, router: router, policy: cfg.Policy}, nil
}

// SetPolicy replaces the policy (a customer editing its rules).
func (s *Server) SetPolicy(p Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p
	return nil
}

func (s *Server) current() Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy
}

// Handler is the HTTP handler: the generated routes, each behind the bearer
// check (401) and the validation of the request against the description
// (400), both answered with an ErrorResponse.
func (s *Server) Handler() http.Handler {
	mws := append([]MiddlewareFunc{s.validate}, s.cfg.Middlewares...)
	return HandlerWithOptions(s, StdHTTPServerOptions{Middlewares: mws, ErrorHandlerFunc: func(w http.ResponseWriter, _ *http.Request, err error) {
		writeError(w, http.StatusBadRequest, err.Error())
	}})
}

// validate authenticates and validates a request before its operation.
func (s *Server) validate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := s.router.FindRoute(r)
		if err != nil {
			writeError(w, http.StatusNotFound, err.Error())
			return
		}
		sec := route.Operation.Security
		if sec == nil {
			sec = &s.spec.Security
		}
		if len(*sec) > 0 {
			if s.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+s.cfg.Token)) != 1 {
				writeError(w, http.StatusUnauthorized, "invalid or missing bearer token")
				return
			}
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
		if err != nil || len(body) > MaxRequestBytes {
			writeError(w, http.StatusBadRequest, "request body unreadable or too large")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			s.log.Info("arcade hook: invalid request", "path", r.URL.Path, "err", err)
			writeError(w, http.StatusBadRequest, "malformed request: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// AccessHook answers `only` (Policy.Only), else `deny` (Policy.Hide and
// the destructive tools), else nothing.
func (s *Server) AccessHook(w http.ResponseWriter, r *http.Request) {
	var req AccessHookRequest
	if !decode(w, r, &req) {
		return
	}
	p := s.current()
	var res AccessHookResult
	if len(p.Only) > 0 {
		only := selection(req.Toolkits, p.Only, false)
		res.Only = &only
	} else if len(p.Hide) > 0 || p.HideDestructive {
		deny := selection(req.Toolkits, p.Hide, p.HideDestructive)
		if len(deny) > 0 {
			res.Deny = &deny
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// selection is the Arcade-shaped list of the requested tools that names
// match: a toolkit named alone is answered without tools (the whole
// toolkit), a tool with the requested versions, a tool@version with that
// version. destructive adds the tools whose metadata says so.
func selection(req Toolkits, names []string, destructive bool) Toolkits {
	out := Toolkits{}
	add := func(tk, tool string, v ToolVersionInfo) {
		info := out[tk]
		if info.Tools == nil {
			info.Tools = &map[string][]ToolVersionInfo{}
			out[tk] = info
		}
		(*info.Tools)[tool] = append((*info.Tools)[tool], ToolVersionInfo{Version: v.Version})
	}
	for _, tk := range slices.Sorted(maps.Keys(req)) {
		if slices.Contains(names, tk) {
			out[tk] = ToolkitInfo{}
			continue
		}
		if req[tk].Tools == nil {
			continue
		}
		tools := *req[tk].Tools
		for _, tool := range slices.Sorted(maps.Keys(tools)) {
			for _, v := range tools[tool] {
				ver := ""
				if v.Version != nil {
					ver = *v.Version
				}
				if slices.Contains(names, tk+"."+tool) || slices.Contains(names, tk+"."+tool+"@"+ver) || (destructive && isDestructive(v.Metadata)) {
					add(tk, tool, v)
				}
			}
		}
	}
	return out
}

func isDestructive(m *ToolMetadata) bool {
	return m != nil && m.Behavior != nil && m.Behavior.Destructive != nil && *m.Behavior.Destructive
}

// PreHook denies (CHECK_FAILED or RATE_LIMIT_EXCEEDED) or lets the call
// through with the policy's inputs and secrets as overrides.
func (s *Server) PreHook(w http.ResponseWriter, r *http.Request) {
	var req PreHookRequest
	if !decode(w, r, &req) {
		return
	}
	p := s.current()
	fqn := req.Tool.Toolkit + "." + req.Tool.Name
	if msg, ok := p.Deny[fqn]; ok {
		writeJSON(w, http.StatusOK, PreHookResult{Code: CHECKFAILED, ErrorMessage: &msg})
		return
	}
	if msg, ok := p.RateLimit[fqn]; ok {
		writeJSON(w, http.StatusOK, PreHookResult{Code: RATELIMITEXCEEDED, ErrorMessage: &msg})
		return
	}
	res := PreHookResult{Code: OK}
	var o PreHookOverride
	if set, ok := p.Inputs[fqn]; ok {
		inputs := maps.Clone(req.Inputs)
		if inputs == nil {
			inputs = map[string]any{}
		}
		maps.Copy(inputs, set)
		o.Inputs = &inputs
	}
	if sec, ok := p.Secrets[fqn]; ok {
		o.Secrets = &sec
	}
	if o.Inputs != nil || o.Secrets != nil {
		res.Override = &o
	}
	writeJSON(w, http.StatusOK, res)
}

// PostHook denies the output or replaces it.
func (s *Server) PostHook(w http.ResponseWriter, r *http.Request) {
	var req PostHookRequest
	if !decode(w, r, &req) {
		return
	}
	p := s.current()
	fqn := req.Tool.Toolkit + "." + req.Tool.Name
	if msg, ok := p.DenyOutput[fqn]; ok {
		writeJSON(w, http.StatusOK, PostHookResult{Code: CHECKFAILED, ErrorMessage: &msg})
		return
	}
	res := PostHookResult{Code: OK}
	if out, ok := p.Output[fqn]; ok {
		res.Override = &PostHookOverride{Output: out}
	}
	writeJSON(w, http.StatusOK, res)
}

// HealthCheck answers the policy's status: 503 when unhealthy.
func (s *Server) HealthCheck(w http.ResponseWriter, _ *http.Request) {
	st := s.current().Health
	if st == "" {
		st = Healthy
	}
	code := http.StatusOK
	if st == Unhealthy {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, HealthResponse{Status: &st})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed request: "+err.Error())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: &msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"answer not encodable"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
