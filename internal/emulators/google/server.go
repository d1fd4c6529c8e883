// Package google emulates the Google Docs v1 API (documents create, get and
// batchUpdate with the real index model), Drive v3 (files list with the q
// language, get, update, delete, export, about, comments), People v1 (people/me) and
// the picker backend at the real paths and with the real JSON, so that the
// unmodified google.golang.org/api clients work against it through
// option.WithEndpoint. Every call needs a bearer token of the OAuth emulator
// (internal/emulators/oauth) holding a scope Google requires; a token with
// only drive.file sees the files its client created or was granted.
package google

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	docs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("google emulator: invalid config")

// Authenticator checks a request's bearer token (implemented by
// *oauth.Server): status 401 for a bad token, 403 for a missing scope.
type Authenticator interface {
	Authenticate(r *http.Request, anyScope ...string) (oauth.Grant, int, error)
}

// Config of the emulator.
type Config struct {
	Auth   Authenticator
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body (default 10 MiB, as Google).
	MaxBodyBytes int64
	// Now is the clock of Drive timestamps (default time.Now).
	Now func() time.Time
	// Users names the accounts for Drive about and People (display name);
	// a user not listed is named after their email's local part.
	Users []oauth.User
}

// DefaultConfig answers a Config with the defaults and no authenticator.
func DefaultConfig() Config {
	return Config{Logger: slog.Default(), MaxBodyBytes: 10 << 20, Now: time.Now}
}

// Validate reports the first problem of the config.
func (c Config) Validate() error {
	if c.Auth == nil {
		return fmt.Errorf("%w: an authenticator is required", ErrInvalidConfig)
	}
	if c.MaxBodyBytes <= 0 {
		return fmt.Errorf("%w: MaxBodyBytes must be positive", ErrInvalidConfig)
	}
	return nil
}

// Scopes Google accepts for the Docs methods.
const (
	ScopeDocs         = "https://www.googleapis.com/auth/documents"
	ScopeDocsReadOnly = "https://www.googleapis.com/auth/documents.readonly"
	ScopeDrive        = "https://www.googleapis.com/auth/drive"
	ScopeDriveRO      = "https://www.googleapis.com/auth/drive.readonly"
	ScopeDriveFile    = "https://www.googleapis.com/auth/drive.file"
)

// Server is the emulator; it is safe for concurrent use.
type Server struct {
	cfg     Config
	pageKey []byte // HMAC key of Drive page tokens
	mu      sync.Mutex
	docs    map[string]*document
	files   map[string]*driveFile // Drive metadata, by document id
	drives  map[string]*sharedDrive
	granted map[fileGrant]bool // drive.file grants (the picker)
	nextCID int64              // comment ids
}

// New answers a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 10 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Server{cfg: cfg, pageKey: key, docs: map[string]*document{}, files: map[string]*driveFile{},
		drives: map[string]*sharedDrive{}, granted: map[fileGrant]bool{}}, nil
}

// Handler answers the HTTP handler, rooted where the client's endpoint points.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/documents", s.createDocument)
	mux.HandleFunc("GET /v1/documents/{id}", s.getDocument)
	mux.HandleFunc("POST /v1/documents/{idop}", s.batchUpdate)
	mux.HandleFunc("GET /drive/v3/files", s.listFiles)
	mux.HandleFunc("GET /drive/v3/files/{id}", s.getFile)
	mux.HandleFunc("PATCH /drive/v3/files/{id}", s.patchFile)
	mux.HandleFunc("DELETE /drive/v3/files/{id}", s.deleteFile)
	mux.HandleFunc("GET /drive/v3/files/{id}/export", s.exportFile)
	mux.HandleFunc("GET /drive/v3/about", s.getAbout)
	mux.HandleFunc("GET /drive/v3/files/{id}/comments", s.listComments)
	mux.HandleFunc("POST /drive/v3/files/{id}/comments", s.createComment)
	mux.HandleFunc("GET /drive/v3/files/{id}/comments/{cid}", s.getComment)
	mux.HandleFunc("DELETE /drive/v3/files/{id}/comments/{cid}", s.deleteComment)
	mux.HandleFunc("GET /v1/people/{id}", s.getPerson)
	mux.HandleFunc("GET /picker/v1/files", cors(s.pickerFiles))
	mux.HandleFunc("POST /picker/v1/grant", cors(s.pickerGrant))
	mux.HandleFunc("OPTIONS /picker/v1/{any}", cors(nil))
	mux.HandleFunc("GET /js/api.js", s.pickerJS) // the picker script (picker_script.go)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Method not found.")
	})
	return mux
}

// writeError answers Google's error JSON.
func writeError(w http.ResponseWriter, code int, msg string) {
	status := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		409: "ABORTED", 500: "INTERNAL"}[code]
	if status == "" {
		status = "UNKNOWN"
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}

// auth answers the grant or writes the 401/403.
func (s *Server) auth(w http.ResponseWriter, r *http.Request, scopes ...string) (oauth.Grant, bool) {
	g, status, err := s.cfg.Auth.Authenticate(r, scopes...)
	switch {
	case err == nil:
		return g, true
	case status == http.StatusForbidden:
		writeError(w, status, "Request had insufficient authentication scopes.")
	default:
		writeError(w, http.StatusUnauthorized, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
	}
	return g, false
}

func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "Request payload is too large or unreadable.")
		return false
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return false
	}
	return true
}

func newID() string {
	b := make([]byte, 33)
	_, _ = rand.Read(b)
	return "1" + base64.RawURLEncoding.EncodeToString(b)[:43]
}

// revisionID is opaque to clients and changes on every write.
func revisionID(d *document) string {
	return "ALBJ4Ls" + base64.RawURLEncoding.EncodeToString([]byte(d.ID[:8]+"/"+strconv.FormatInt(d.Revision, 10)))
}

func (s *Server) createDocument(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeDocs, ScopeDrive, ScopeDriveFile)
	if !ok {
		return
	}
	var in docs.Document
	if !s.readJSON(w, r, &in) {
		return
	}
	d := &document{ID: newID(), Title: in.Title, Owner: g.UserID, Revision: 1, Tabs: []*tab{newTab("t.0", "Tab 1")}}
	if d.Title == "" {
		d.Title = "Untitled document"
	}
	s.mu.Lock()
	s.docs[d.ID] = d
	s.addFileLocked(d, g, "")
	out := render(d, false)
	s.mu.Unlock()
	writeJSON(w, out)
}

// lookupLocked answers the document if the grant reads it (its user can
// access the file and, with only drive.file, its client created or was
// granted it); else writes Google's 404, which does not tell the cases apart.
func (s *Server) lookupLocked(w http.ResponseWriter, id string, g oauth.Grant) (*document, bool) {
	return s.lookupForLocked(w, id, g, readContent)
}

// lookupForLocked is lookupLocked for the access a: a document the grant
// reads but may not write answers 403 PERMISSION_DENIED.
func (s *Server) lookupForLocked(w http.ResponseWriter, id string, g oauth.Grant, a access) (*document, bool) {
	d, ok := s.docs[id]
	var f *driveFile
	if ok {
		f, ok = s.fileLocked(id)
	}
	if !ok || !s.allowedLocked(g, f, readOf(a)) {
		writeError(w, http.StatusNotFound, "Requested entity was not found.")
		return nil, false
	}
	if !s.allowedLocked(g, f, a) {
		writeError(w, http.StatusForbidden, "The caller does not have permission")
		return nil, false
	}
	return d, true
}

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeDocs, ScopeDocsReadOnly, ScopeDrive, ScopeDriveRO, ScopeDriveFile)
	if !ok {
		return
	}
	q := r.URL.Query()
	switch q.Get("suggestionsViewMode") {
	case "", "DEFAULT_FOR_CURRENT_ACCESS", "SUGGESTIONS_INLINE", "PREVIEW_SUGGESTIONS_ACCEPTED", "PREVIEW_WITHOUT_SUGGESTIONS":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value at 'suggestions_view_mode' (type.googleapis.com/google.apps.docs.v1.SuggestionsViewMode), %q", q.Get("suggestionsViewMode")))
		return
	}
	includeTabs, err := parseBool(q.Get("includeTabsContent"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value at 'include_tabs_content' (TYPE_BOOL), %q", q.Get("includeTabsContent")))
		return
	}
	s.mu.Lock()
	d, ok := s.lookupLocked(w, r.PathValue("id"), g)
	var out *docs.Document
	if ok {
		out = render(d, includeTabs)
	}
	s.mu.Unlock()
	if ok {
		writeJSON(w, out)
	}
}

func parseBool(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

func (s *Server) batchUpdate(w http.ResponseWriter, r *http.Request) {
	id, op, found := strings.Cut(r.PathValue("idop"), ":")
	if !found || op != "batchUpdate" {
		writeError(w, http.StatusNotFound, "Method not found.")
		return
	}
	g, ok := s.auth(w, r, ScopeDocs, ScopeDrive, ScopeDriveFile)
	if !ok {
		return
	}
	var in docs.BatchUpdateDocumentRequest
	if !s.readJSON(w, r, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.lookupForLocked(w, id, g, writeContent)
	if !ok {
		return
	}
	if wc := in.WriteControl; wc != nil {
		if wc.RequiredRevisionId != "" && wc.TargetRevisionId != "" {
			writeError(w, http.StatusBadRequest, "Only one of required_revision_id or target_revision_id may be set.")
			return
		}
		if wc.RequiredRevisionId != "" && wc.RequiredRevisionId != revisionID(d) {
			writeError(w, http.StatusBadRequest, "The document's revision ID does not match the required revision ID. The document has been modified since the requested revision.")
			return
		}
		if wc.TargetRevisionId != "" && wc.TargetRevisionId != revisionID(d) {
			// Google merges against the target revision; the emulator keeps
			// no history, so it refuses as for a revision it cannot find.
			writeError(w, http.StatusBadRequest, "The target revision ID is too old or no longer available.")
			return
		}
	}
	if len(in.Requests) == 0 {
		writeError(w, http.StatusBadRequest, "Must specify at least one request.")
		return
	}
	nd, replies, err := applyBatch(d, in.Requests)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	nd.Revision++
	s.docs[id] = nd
	if f, ok := s.fileLocked(id); ok {
		s.touchLocked(f, g)
	}
	writeJSON(w, &docs.BatchUpdateDocumentResponse{DocumentId: id, Replies: replies,
		WriteControl: &docs.WriteControl{RequiredRevisionId: revisionID(nd)}})
}
