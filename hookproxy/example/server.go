package example

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// Server implements hooksapi.ServerInterface with a Policy.
type Server struct {
	policy Policy
	log    *slog.Logger
	now    func() time.Time

	mu     sync.Mutex
	counts map[string]window
}

type window struct {
	start time.Time
	n     int
}

var _ hooksapi.ServerInterface = (*Server)(nil)

// New returns a server applying policy.
func New(policy Policy, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{policy: policy, log: log, now: time.Now, counts: map[string]window{}}
}

// Handler is the HTTP handler, with bearer authentication when token is set
// (mTLS is configured on the listener; both may be required at once).
// Errors are answered with the contract's ErrorResponse: 400 for a request
// that cannot be read, 401 for a missing or wrong token, 500 when a
// handler fails.
func (s *Server) Handler(token string) http.Handler {
	h := hooksapi.Handler(s)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("hook handler failed", "path", r.URL.Path, "panic", p)
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		if token != "" && r.URL.Path != "/health" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			writeError(w, http.StatusUnauthorized, "unauthorized: missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// verdict says why a tool is denied ("" when allowed).
func (s *Server) verdict(tool hooksapi.Tool) string {
	fqn := tool.Toolkit + "." + tool.Name
	if slices.Contains(s.policy.DenyTools, fqn) {
		return fqn + " is denied by policy"
	}
	m := tool.Metadata
	if s.policy.DenyDestructive && m != nil && m.Behavior != nil && m.Behavior.Destructive != nil && *m.Behavior.Destructive {
		return fqn + " is destructive, and destructive tools are not allowed"
	}
	if len(s.policy.AllowedServiceDomains) > 0 {
		allowed := false
		if m != nil && m.Classification != nil && m.Classification.ServiceDomains != nil {
			for _, d := range *m.Classification.ServiceDomains {
				if slices.ContainsFunc(s.policy.AllowedServiceDomains, func(a string) bool { return strings.EqualFold(a, d) }) {
					allowed = true
				}
			}
		}
		if !allowed {
			return fqn + " is outside the allowed service domains"
		}
	}
	if m != nil && m.Extras != nil {
		for _, r := range s.policy.ProviderRules {
			if v, ok := (*m.Extras)[r.Key]; ok && fmt.Sprint(v) == r.Equals {
				if r.Message != "" {
					return r.Message
				}
				return fmt.Sprintf("%s: %s=%s is denied by policy", fqn, r.Key, r.Equals)
			}
		}
	}
	return ""
}

// allowRate counts an execution against the limits of its operations.
func (s *Server) allowRate(user string, tool hooksapi.Tool) (bool, string) {
	if tool.Metadata == nil || tool.Metadata.Behavior == nil || tool.Metadata.Behavior.Operations == nil {
		return true, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, op := range *tool.Metadata.Behavior.Operations {
		for _, l := range s.policy.RateLimits {
			if l.Operation != op {
				continue
			}
			key := user + "\x00" + op
			w := s.counts[key]
			if now.Sub(w.start) >= l.Per {
				w = window{start: now}
			}
			if w.n >= l.Max {
				return false, fmt.Sprintf("at most %d %s operations per %s", l.Max, op, l.Per)
			}
			w.n++
			s.counts[key] = w
		}
	}
	return true, ""
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// callIn and accessIn are the members of pre, post and access requests the
// policy reads, the same in both request shapes (hooks with contract
// auditrail or arcade): the context's secrets and authorization and the
// requirements, which differ, are not read, so either kind of hook may
// call this server.
type callIn struct {
	ExecutionID string        `json:"execution_id"`
	Tool        hooksapi.Tool `json:"tool"`
	Output      any           `json:"output"`
	Context     struct {
		UserId *string `json:"user_id"`
	} `json:"context"`
}

type accessIn struct {
	UserID   string `json:"user_id"`
	Toolkits map[string]struct {
		Tools map[string][]struct {
			Version  string                 `json:"version"`
			Metadata *hooksapi.ToolMetadata `json:"metadata"`
		} `json:"tools"`
	} `json:"toolkits"`
}

// writeError answers the contract's ErrorResponse.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(hooksapi.ErrorResponse{Error: &msg})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed request: "+err.Error())
		return false
	}
	return true
}

// Access denies, in one answer, every tool the policy would deny.
func (s *Server) Access(w http.ResponseWriter, r *http.Request) {
	var req accessIn
	if !decode(w, r, &req) {
		return
	}
	names := map[string]hooksapi.ToolNames{}
	for tk, info := range req.Toolkits {
		for name, versions := range info.Tools {
			for _, v := range versions {
				if s.verdict(hooksapi.Tool{Toolkit: tk, Name: name, Version: v.Version, Metadata: v.Metadata}) != "" {
					names[tk] = append(names[tk], name)
					break
				}
			}
		}
	}
	deny := hooksapi.ToolSelection{}
	for tk, list := range names {
		var sel hooksapi.ToolkitSelection
		if err := sel.FromToolNames(list); err != nil {
			writeError(w, http.StatusInternalServerError, "cannot encode the answer")
			return
		}
		deny[tk] = sel
	}
	if len(deny) == 0 {
		writeJSON(w, hooksapi.AccessResponse{})
		return
	}
	writeJSON(w, hooksapi.AccessResponse{Deny: &deny})
}

// Pre applies the policy and the rate limits.
func (s *Server) Pre(w http.ResponseWriter, r *http.Request) {
	var req callIn
	if !decode(w, r, &req) {
		return
	}
	if why := s.verdict(req.Tool); why != "" {
		writeJSON(w, hooksapi.PreResponse{Code: hooksapi.CHECKFAILED, ErrorMessage: &why})
		return
	}
	user := ""
	if req.Context.UserId != nil {
		user = *req.Context.UserId
	}
	if ok, why := s.allowRate(user, req.Tool); !ok {
		writeJSON(w, hooksapi.PreResponse{Code: hooksapi.RATELIMITEXCEEDED, ErrorMessage: &why})
		return
	}
	writeJSON(w, hooksapi.PreResponse{Code: hooksapi.OK})
}

// Post removes the redacted keys from JSON outputs.
func (s *Server) Post(w http.ResponseWriter, r *http.Request) {
	var req callIn
	if !decode(w, r, &req) {
		return
	}
	if len(s.policy.RedactOutputKeys) == 0 || req.Output == nil {
		writeJSON(w, hooksapi.PostResponse{Code: hooksapi.OK})
		return
	}
	out, changed := redact(req.Output, s.policy.RedactOutputKeys)
	if !changed {
		writeJSON(w, hooksapi.PostResponse{Code: hooksapi.OK})
		return
	}
	writeJSON(w, hooksapi.PostResponse{Code: hooksapi.OK, Override: &hooksapi.PostOverride{Output: out}})
}

func redact(v any, keys []string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			if slices.Contains(keys, k) {
				changed = true
				continue
			}
			ne, c := redact(e, keys)
			out[k], changed = ne, changed || c
		}
		return out, changed
	case []any:
		changed := false
		out := make([]any, len(x))
		for i, e := range x {
			var c bool
			out[i], c = redact(e, keys)
			changed = changed || c
		}
		return out, changed
	}
	return v, false
}

// Health answers liveness in the contract's (and Arcade's) terms.
func (s *Server) Health(w http.ResponseWriter, _ *http.Request) {
	st := hooksapi.Healthy
	writeJSON(w, hooksapi.HealthResponse{Status: &st})
}
