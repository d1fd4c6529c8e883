// Package graph emulates the mail part of Microsoft Graph v1.0 at its real
// paths and with its real JSON: /me, /me/mailboxSettings, /me/mailFolders
// (well-known names, childFolders, includeHiddenFolders), /me/messages and
// the messages of a folder ($filter, $orderby, $search, $top, $skip,
// $select, $count, @odata.nextLink), attachments, drafts (create,
// createReply, createReplyAll, createForward, PATCH while a draft, send,
// sendMail, reply, replyAll, forward) and the Prefer headers
// outlook.body-content-type and IdType="ImmutableId". It is stateful: one
// mailbox per user of the OAuth emulator (internal/emulators/oauth), and
// mail sent to another mailbox of the emulator is delivered to its Inbox.
//
// The handler is mounted at the API base (what
// https://graph.microsoft.com/v1.0 is to Graph), e.g. with http.StripPrefix;
// every call needs a bearer token of the OAuth emulator holding a scope
// Graph requires (Mail.Read, Mail.ReadWrite, Mail.Send, User.Read,
// MailboxSettings.Read). Errors have Graph's shape:
// {"error":{"code":…,"message":…,"innerError":{"date","request-id","client-request-id"}}}.
package graph

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("graph emulator: invalid config")

// ErrUnknownMailbox is answered by the Go API (SeedSample, Deliver…) for a
// user without a mailbox.
var ErrUnknownMailbox = errors.New("graph emulator: unknown mailbox")

// Authenticator checks a request's bearer token (implemented by
// *oauth.Server): status 401 for a bad token, 403 for a missing scope.
type Authenticator interface {
	Authenticate(r *http.Request, anyScope ...string) (oauth.Grant, int, error)
}

// Delegated permission names, as Graph spells them.
const (
	ScopeMailRead            = "Mail.Read"
	ScopeMailReadWrite       = "Mail.ReadWrite"
	ScopeMailSend            = "Mail.Send"
	ScopeUserRead            = "User.Read"
	ScopeMailboxSettingsRead = "MailboxSettings.Read"
	// ScopeMailboxSettingsReadWrite includes MailboxSettings.Read.
	ScopeMailboxSettingsReadWrite = "MailboxSettings.ReadWrite"
)

// Config of the emulator.
type Config struct {
	Auth   Authenticator
	Logger *slog.Logger
	// BaseURL is the public URL the handler is mounted at (used in
	// @odata.nextLink and @odata.context); empty derives it from each
	// request's Host and the prefix stripped before the handler.
	BaseURL string
	// MaxBodyBytes bounds a request body (default 4 MiB, Graph's limit for
	// a request with inline attachments).
	MaxBodyBytes int64
	// Now is the clock of message timestamps (default time.Now).
	Now func() time.Time
	// Users names the mailboxes created on first use (display name); a user
	// not listed gets a mailbox named after their email's local part.
	Users []oauth.User
	// Throttle, when set, is asked before every authenticated call: a
	// positive duration answers 429 with that Retry-After (whole seconds,
	// rounded up), as Graph's throttling does.
	Throttle func(r *http.Request, g oauth.Grant) time.Duration
	// MaxTop is the largest $top of a message list (Graph: 1000).
	MaxTop int
}

// DefaultConfig answers a Config with the defaults and no authenticator.
func DefaultConfig() Config {
	return Config{Logger: slog.Default(), MaxBodyBytes: 4 << 20, Now: time.Now, MaxTop: 1000}
}

// Validate reports the first problem of the config.
func (c Config) Validate() error {
	if c.Auth == nil {
		return fmt.Errorf("%w: an authenticator is required", ErrInvalidConfig)
	}
	if c.MaxBodyBytes <= 0 {
		return fmt.Errorf("%w: MaxBodyBytes must be positive", ErrInvalidConfig)
	}
	if c.MaxTop <= 0 {
		return fmt.Errorf("%w: MaxTop must be positive", ErrInvalidConfig)
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return fmt.Errorf("%w: BaseURL %q must be an absolute http(s) URL without a query", ErrInvalidConfig, c.BaseURL)
		}
	}
	return nil
}

// Server is the emulator; it is safe for concurrent use.
type Server struct {
	cfg       Config
	mu        sync.Mutex
	mailboxes map[string]*mailbox // by user id
	byEmail   map[string]*mailbox // by lower-case address
	ids       map[string]*message // default (REST) ids and immutable ids
	folderIDs map[string]*folder
	attIDs    map[string]*attachment
	seq       int64 // change keys
}

// New answers a Server.
func New(cfg Config) (*Server, error) {
	d := DefaultConfig()
	if cfg.Logger == nil {
		cfg.Logger = d.Logger
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = d.MaxBodyBytes
	}
	if cfg.Now == nil {
		cfg.Now = d.Now
	}
	if cfg.MaxTop == 0 {
		cfg.MaxTop = d.MaxTop
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	return &Server{cfg: cfg, mailboxes: map[string]*mailbox{}, byEmail: map[string]*mailbox{},
		ids: map[string]*message{}, folderIDs: map[string]*folder{}, attIDs: map[string]*attachment{}}, nil
}

// Graph error codes the emulator answers.
const (
	CodeItemNotFound         = "ErrorItemNotFound"
	CodeInvalidIDMalformed   = "ErrorInvalidIdMalformed"
	CodeInvalidRequest       = "ErrorInvalidRequest"
	CodeBadRequest           = "BadRequest"
	CodeAccessDenied         = "ErrorAccessDenied"
	CodeInvalidAuthToken     = "InvalidAuthenticationToken"
	CodeInvalidRecipients    = "ErrorInvalidRecipients"
	CodeUpdateSentMessage    = "ErrorInvalidPropertyUpdateSentMessage"
	CodeSearchWithOrderBy    = "SearchWithOrderBy"
	CodeInvalidURLQuery      = "ErrorInvalidUrlQuery"
	CodeApplicationThrottled = "ApplicationThrottled"
	CodeRequestBodyRead      = "RequestBodyRead"
	CodeUnsupportedMediaType = "UnsupportedMediaType"
)

// Messages of the errors, as Graph words them.
const (
	msgItemNotFound = "The specified object was not found in the store."
	msgMalformedID  = "Id is malformed."
	msgAccessDenied = "Access is denied. Check credentials and try again."
)

// writeError answers Graph's error JSON.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	inner := map[string]any{"date": time.Now().UTC().Format("2006-01-02T15:04:05"), "request-id": newGUID()}
	if r != nil {
		if c := r.Header.Get("client-request-id"); c != "" {
			inner["client-request-id"] = c
			w.Header().Set("client-request-id", c)
		} else {
			inner["client-request-id"] = inner["request-id"]
		}
	}
	w.Header().Set("request-id", inner["request-id"].(string))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "innerError": inner}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; odata.metadata=minimal; odata.streaming=true; IEEE754Compatible=false; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newGUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Handler answers the HTTP handler, rooted at the API base.
func (s *Server) Handler() http.Handler {
	me := http.NewServeMux()
	me.HandleFunc("GET /me", s.getMe)
	me.HandleFunc("GET /me/mailboxSettings", s.getMailboxSettings)
	me.HandleFunc("GET /me/mailboxSettings/automaticRepliesSetting", s.getAutomaticReplies)
	me.HandleFunc("GET /me/mailFolders", s.listFolders)
	me.HandleFunc("GET /me/mailFolders/{fid}", s.getFolder)
	me.HandleFunc("GET /me/mailFolders/{fid}/childFolders", s.listChildFolders)
	me.HandleFunc("GET /me/mailFolders/{fid}/messages", s.listFolderMessages)
	me.HandleFunc("POST /me/mailFolders/{fid}/messages", s.createFolderMessage)
	me.HandleFunc("GET /me/mailFolders/{fid}/messages/{id}", s.getFolderMessage)
	me.HandleFunc("GET /me/messages", s.listMessages)
	me.HandleFunc("POST /me/messages", s.createMessage)
	me.HandleFunc("GET /me/messages/{id}", s.getMessage)
	me.HandleFunc("PATCH /me/messages/{id}", s.patchMessage)
	me.HandleFunc("DELETE /me/messages/{id}", s.deleteMessage)
	me.HandleFunc("GET /me/messages/{id}/attachments", s.listAttachments)
	me.HandleFunc("POST /me/messages/{id}/attachments", s.addAttachment)
	me.HandleFunc("GET /me/messages/{id}/attachments/{aid}", s.getAttachment)
	me.HandleFunc("POST /me/messages/{id}/{action}", s.messageAction)
	me.HandleFunc("POST /me/sendMail", s.sendMail)
	me.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Graph's answer for a path it does not route.
		writeError(w, r, http.StatusBadRequest, CodeBadRequest,
			fmt.Sprintf("Resource not found for the segment '%s'.", lastSegment(r.URL.Path)))
	})
	root := http.NewServeMux()
	root.Handle("/me", me)
	root.Handle("/me/", me)
	root.HandleFunc("/users/{user}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		s.serveUser(me, w, r, r.PathValue("user"), "/"+r.PathValue("rest"))
	})
	root.HandleFunc("/users/{user}", func(w http.ResponseWriter, r *http.Request) {
		s.serveUser(me, w, r, r.PathValue("user"), "")
	})
	root.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusBadRequest, CodeBadRequest,
			fmt.Sprintf("Resource not found for the segment '%s'.", lastSegment(r.URL.Path)))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), baseKey{}, s.requestBase(r)))
		if p, ok := keySegments(r.URL.Path); ok {
			r.URL.Path, r.URL.RawPath = p, ""
		}
		root.ServeHTTP(w, r)
	})
}

// keySegments rewrites OData key segments, which Graph accepts beside
// plain ones: /me/mailFolders('Inbox')/messages is /me/mailFolders/Inbox/messages.
func keySegments(p string) (string, bool) {
	if !strings.Contains(p, "('") {
		return p, false
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		open := strings.Index(seg, "('")
		if open <= 0 || !strings.HasSuffix(seg, "')") || len(seg) < open+4 {
			continue
		}
		key := seg[open+2 : len(seg)-2]
		if strings.Contains(strings.ReplaceAll(key, "''", ""), "'") {
			continue
		}
		segs[i] = seg[:open] + "/" + strings.ReplaceAll(key, "''", "'")
	}
	return strings.Join(segs, "/"), true
}

type baseKey struct{}

// serveUser answers /users/{id|upn}/… as /me/… when the user is the
// token's own; a delegated token reaching another mailbox gets Graph's 403.
func (s *Server) serveUser(me http.Handler, w http.ResponseWriter, r *http.Request, user, rest string) {
	// The inner handler authenticates (and throttles) the call; here only a
	// valid token naming another mailbox is refused.
	g, _, err := s.cfg.Auth.Authenticate(r)
	if err == nil && user != g.UserID && !strings.EqualFold(user, g.Email) && !strings.EqualFold(user, userGUID(g.UserID)) {
		writeError(w, r, http.StatusForbidden, CodeAccessDenied, msgAccessDenied)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/me" + rest
	r2.URL.RawPath = ""
	me.ServeHTTP(w, r2)
}

func lastSegment(p string) string {
	p = strings.TrimSuffix(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// auth answers the grant or writes the 401/403/429. With scopes, the token
// must hold one of them.
func (s *Server) auth(w http.ResponseWriter, r *http.Request, scopes ...string) (oauth.Grant, bool) {
	g, status, err := s.cfg.Auth.Authenticate(r, scopes...)
	switch {
	case err == nil:
	case status == http.StatusForbidden:
		writeError(w, r, http.StatusForbidden, CodeAccessDenied, msgAccessDenied)
		return g, false
	default:
		msg := "Access token validation failure. Invalid audience."
		switch {
		case !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) == "":
			msg = "Access token is empty."
		case errors.Is(err, oauth.ErrExpired):
			msg = "Lifetime validation failed, the token is expired."
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", client_id="00000003-0000-0000-c000-000000000000"`)
		writeError(w, r, http.StatusUnauthorized, CodeInvalidAuthToken, msg)
		return g, false
	}
	if s.cfg.Throttle != nil {
		if d := s.cfg.Throttle(r, g); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
			writeError(w, r, http.StatusTooManyRequests, CodeApplicationThrottled, "Application is over its MailboxConcurrency limit.")
			return g, false
		}
	}
	return g, true
}

// readJSON decodes the body into v; an empty body is {} when allowEmpty.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, r, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "The request payload is too large.")
			return false
		}
		writeError(w, r, http.StatusBadRequest, CodeRequestBodyRead, "Unable to read the request body.")
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if allowEmpty {
			body = []byte("{}")
		} else {
			writeError(w, r, http.StatusBadRequest, CodeRequestBodyRead, "Empty Payload. JSON content expected.")
			return false
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		writeError(w, r, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, fmt.Sprintf("A supported MIME type could not be found that matches the content type of the response. None of the supported type(s) 'application/json' matches the content type '%s'.", ct))
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, r, http.StatusBadRequest, CodeRequestBodyRead, "Invalid JSON. "+err.Error())
		return false
	}
	return true
}

// requestBase answers the public URL of the API base for the request as
// the handler receives it (after any http.StripPrefix).
func (s *Server) requestBase(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return s.cfg.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	prefix := ""
	if orig, err := url.ParseRequestURI(r.RequestURI); err == nil && strings.HasSuffix(orig.Path, r.URL.Path) {
		prefix = strings.TrimSuffix(orig.Path[:len(orig.Path)-len(r.URL.Path)], "/")
	}
	return scheme + "://" + r.Host + prefix
}

// baseURL answers the API base of the request (set by Handler).
func baseURL(r *http.Request) string {
	b, _ := r.Context().Value(baseKey{}).(string)
	return b
}

// prefs are the Prefer header's preferences Graph's mail API honours.
type prefs struct {
	bodyType  string // "text", "html" or "" (as stored)
	immutable bool
}

func parsePrefer(r *http.Request) prefs {
	var p prefs
	for _, h := range r.Header.Values("Prefer") {
		for _, part := range strings.Split(h, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			v = strings.Trim(strings.TrimSpace(v), `"`)
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "outlook.body-content-type":
				if t := strings.ToLower(v); t == "text" || t == "html" {
					p.bodyType = t
				}
			case "idtype":
				p.immutable = strings.EqualFold(v, "ImmutableId")
			}
		}
	}
	return p
}

// applied sets Preference-Applied for the preferences honoured.
func (p prefs) applied(w http.ResponseWriter) {
	var out []string
	if p.bodyType != "" {
		out = append(out, `outlook.body-content-type="`+p.bodyType+`"`)
	}
	if p.immutable {
		out = append(out, `IdType="ImmutableId"`)
	}
	if len(out) > 0 {
		w.Header().Set("Preference-Applied", strings.Join(out, ", "))
	}
}
