package google

import (
	"net/http"
	"slices"
	"strings"
)

// The picker backend: emulator-only endpoints standing in for the backend
// of Google's own picker UI. The platform's picker page (another origin)
// calls them with the user's bearer token:
//
//	GET  /picker/v1/files  -> {"files":[{"id","name","mimeType","modifiedTime","url"}]}
//	                          every non-trashed file the token's user can access
//	POST /picker/v1/grant  {"fileIds":[…]} -> {"granted":[…]}
//	                          drive.file access for the token's client (all or nothing)

// cors opens the picker endpoints to the picker page's origin (bearer
// tokens, no cookies) and answers preflights.
func cors(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next(w, r)
	}
}

type pickerFile struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	MimeType     string `json:"mimeType"`
	ModifiedTime string `json:"modifiedTime"`
	URL          string `json:"url"`
}

// pickerFiles is GET /picker/v1/files.
func (s *Server) pickerFiles(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveReadScopes...)
	if !ok {
		return
	}
	s.mu.Lock()
	s.syncFilesLocked()
	var hits []*driveFile
	for _, f := range s.files {
		if !f.Trashed && s.canAccessLocked(g.UserID, f) {
			hits = append(hits, f)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(hits, func(a, b *driveFile) int {
		if c := b.Modified.Compare(a.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := make([]pickerFile, 0, len(hits))
	for _, f := range hits {
		out = append(out, pickerFile{ID: f.ID, Name: f.Name, MimeType: f.MimeType, ModifiedTime: rfc3339(f.Modified),
			URL: "https://docs.google.com/document/d/" + f.ID + "/edit?usp=drive_web"})
	}
	writeJSON(w, map[string]any{"files": out})
}

// maxPickerGrant bounds the ids of one grant request.
const maxPickerGrant = 1000

// pickerGrant is POST /picker/v1/grant.
func (s *Server) pickerGrant(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveReadScopes...)
	if !ok {
		return
	}
	var in struct {
		FileIDs []string `json:"fileIds"`
	}
	if !s.readJSON(w, r, &in) {
		return
	}
	if len(in.FileIDs) == 0 || len(in.FileIDs) > maxPickerGrant {
		invalidParam(w, "fileIds must hold 1 to 1000 file ids.", "fileIds")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range in.FileIDs { // all or nothing
		f, ok := s.fileLocked(id)
		if !ok || !s.canAccessLocked(g.UserID, f) {
			fileNotFound(w, id)
			return
		}
	}
	for _, id := range in.FileIDs {
		if err := s.grantFileLocked(g.UserID, g.ClientID, id); err != nil {
			fileNotFound(w, id) // unreachable: checked above under the same lock
			return
		}
	}
	writeJSON(w, map[string]any{"granted": in.FileIDs})
}
