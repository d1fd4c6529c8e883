package google

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"html"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	drive "google.golang.org/api/drive/v3"

	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

// MimeTypeDocument is the Drive MIME type of a Google Doc.
const MimeTypeDocument = "application/vnd.google-apps.document"

// ErrNotFound is wrapped by the Go API's errors for an unknown user, file or
// shared drive.
var ErrNotFound = errors.New("google emulator: not found")

// driveFile is the Drive metadata of a document (id = the document id). It
// lives beside the document (model.go is the Docs model); the Drive and Docs
// handlers both decide visibility from it.
type driveFile struct {
	ID, Name, MimeType string
	Owner, OwnerEmail  string // user id and email of the creator
	CreatedByClient    string // OAuth client that created it (drive.file)
	DriveID            string // shared drive, "" for My Drive
	Created, Modified  time.Time
	LastModifier       string // user id of the last edit
	LastModifierEmail  string
	ModifiedBy         map[string]time.Time // user id -> their last edit (modifiedByMeTime)
	ViewedBy           map[string]time.Time // user id -> their last view (viewedByMeTime)
	Trashed, Starred   bool
	Comments           []*comment
}

// sharedDrive is a shared drive; its members see every file in it.
type sharedDrive struct {
	ID, Name string
	Created  time.Time
	Members  map[string]bool // user ids
}

// fileGrant is a drive.file grant: the client may see the user's file.
type fileGrant struct{ user, client, file string }

// access is what a call does with a file.
type access int

const (
	readContent  access = iota // documents.get, files.export, comments list/get
	writeContent               // documents.batchUpdate, comments create/delete
	readMeta                   // files.list, files.get
	writeMeta                  // files.update, files.delete
)

// fullScopes reach every file of the user for the access; a grant without
// one reaches, with drive.file, the files its client created or was granted.
// The Docs scopes open the Docs API only; the metadata scopes open no content.
var fullScopes = map[access][]string{
	readContent:  {ScopeDocs, ScopeDocsReadOnly, ScopeDrive, ScopeDriveRO},
	writeContent: {ScopeDocs, ScopeDrive},
	readMeta:     {ScopeDrive, ScopeDriveRO, ScopeDriveMeta, ScopeDriveMetaRO},
	writeMeta:    {ScopeDrive, ScopeDriveMeta},
}

// readOf is the access that must hold for a file to exist for the caller.
func readOf(a access) access {
	switch a {
	case writeContent:
		return readContent
	case writeMeta:
		return readMeta
	}
	return a
}

// Drive scopes besides those of the Docs methods.
const (
	ScopeDriveMeta   = "https://www.googleapis.com/auth/drive.metadata"
	ScopeDriveMetaRO = "https://www.googleapis.com/auth/drive.metadata.readonly"
)

func (s *Server) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Millisecond) }

// addFileLocked registers the Drive file of a new document, created by the
// grant's user and client (a seed passes oauth.Grant{UserID, ClientID} of the
// platform's client, so that its drive.file tokens see the document).
func (s *Server) addFileLocked(d *document, g oauth.Grant, driveID string) *driveFile {
	now := s.now()
	email := g.Email
	if email == "" {
		email = s.userEmail(d.Owner, "")
	}
	f := &driveFile{ID: d.ID, Name: d.Title, MimeType: MimeTypeDocument, Owner: d.Owner, OwnerEmail: email,
		CreatedByClient: g.ClientID, DriveID: driveID, Created: now, Modified: now, LastModifier: d.Owner, LastModifierEmail: email,
		ModifiedBy: map[string]time.Time{d.Owner: now}, ViewedBy: map[string]time.Time{d.Owner: now}}
	s.files[d.ID] = f
	return f
}

// fileLocked answers the Drive file of id. A document stored without one
// (e.g. by a seed written against model.go only) gets one on first use, owned
// by the document's owner and created by no client.
func (s *Server) fileLocked(id string) (*driveFile, bool) {
	if f, ok := s.files[id]; ok {
		return f, true
	}
	d, ok := s.docs[id]
	if !ok {
		return nil, false
	}
	now := s.now()
	f := &driveFile{ID: id, Name: d.Title, MimeType: MimeTypeDocument, Owner: d.Owner, OwnerEmail: s.userEmail(d.Owner, ""),
		Created: now, Modified: now, LastModifier: d.Owner, LastModifierEmail: s.userEmail(d.Owner, ""), ModifiedBy: map[string]time.Time{}, ViewedBy: map[string]time.Time{}}
	s.files[id] = f
	return f, true
}

// syncFilesLocked gives every document its Drive file (see fileLocked).
func (s *Server) syncFilesLocked() {
	for id := range s.docs {
		s.fileLocked(id)
	}
}

// canAccessLocked reports whether the user may reach the file at all: they
// own it (My Drive) or are a member of its shared drive.
func (s *Server) canAccessLocked(userID string, f *driveFile) bool {
	if f.DriveID != "" {
		sd, ok := s.drives[f.DriveID]
		return ok && sd.Members[userID]
	}
	return f.Owner == userID
}

// visibleLocked reports whether the grant reads the file's content (see
// allowedLocked).
func (s *Server) visibleLocked(g oauth.Grant, f *driveFile) bool {
	return s.allowedLocked(g, f, readContent)
}

// allowedLocked reports whether the grant may access the file so: the user
// can access it, and the grant holds a scope that reaches all the user's
// files for a, or drive.file with the file created by, or granted to, its
// client (drive.file reads and writes the app's files).
func (s *Server) allowedLocked(g oauth.Grant, f *driveFile, a access) bool {
	if !s.canAccessLocked(g.UserID, f) {
		return false
	}
	if slices.ContainsFunc(fullScopes[a], func(sc string) bool { return slices.Contains(g.Scopes, sc) }) {
		return true
	}
	if !slices.Contains(g.Scopes, ScopeDriveFile) {
		return false
	}
	return f.CreatedByClient != "" && f.CreatedByClient == g.ClientID || s.granted[fileGrant{g.UserID, g.ClientID, f.ID}]
}

// GrantFile gives the OAuth client drive.file access to the user's file, as
// Google does when the user picks the file in the picker. The user must be
// able to access the file.
func (s *Server) GrantFile(userID, clientID, fileID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grantFileLocked(userID, clientID, fileID)
}

func (s *Server) grantFileLocked(userID, clientID, fileID string) error {
	f, ok := s.fileLocked(fileID)
	if !ok || !s.canAccessLocked(userID, f) {
		return fmt.Errorf("%w: file %q for user %q", ErrNotFound, fileID, userID)
	}
	if clientID == "" {
		return fmt.Errorf("google emulator: GrantFile needs a client id")
	}
	s.granted[fileGrant{userID, clientID, fileID}] = true
	return nil
}

// AddSharedDrive creates a shared drive with the user as its only member and
// answers its id.
func (s *Server) AddSharedDrive(userID, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "0A" + newID()[1:20]
	s.drives[id] = &sharedDrive{ID: id, Name: name, Created: s.now(), Members: map[string]bool{userID: true}}
	return id
}

// AddDriveMember adds a user to a shared drive.
func (s *Server) AddDriveMember(driveID, userID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sd, ok := s.drives[driveID]
	if !ok {
		return fmt.Errorf("%w: shared drive %q", ErrNotFound, driveID)
	}
	sd.Members[userID] = true
	return nil
}

// MoveToDrive moves a document into a shared drive (driveID "" moves it back
// to its owner's My Drive).
func (s *Server) MoveToDrive(fileID, driveID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.fileLocked(fileID)
	if !ok {
		return fmt.Errorf("%w: file %q", ErrNotFound, fileID)
	}
	if _, ok := s.drives[driveID]; !ok && driveID != "" {
		return fmt.Errorf("%w: shared drive %q", ErrNotFound, driveID)
	}
	f.DriveID = driveID
	return nil
}

// touchLocked records a write by the user (batchUpdate, PATCH).
func (s *Server) touchLocked(f *driveFile, g oauth.Grant) {
	now := s.now()
	f.Modified, f.LastModifier, f.LastModifierEmail = now, g.UserID, g.Email
	f.ModifiedBy[g.UserID] = now
	f.ViewedBy[g.UserID] = now
}

// bodyText answers the text of every tab's body (markers dropped), for
// fullText search and the file size.
func bodyText(d *document) string {
	var b strings.Builder
	for _, t := range d.Tabs {
		u := make([]uint16, 0, len(t.Body.items))
		for _, it := range t.Body.items {
			if it.k == kChar {
				u = append(u, it.u)
			}
		}
		b.WriteString(string(utf16.Decode(u)))
	}
	return b.String()
}

// comment is a Drive comment on a file.
type comment struct {
	ID, Content           string
	AuthorID, AuthorEmail string
	Created, Modified     time.Time
	Deleted, Resolved     bool
	QuotedValue, QuotedMT string
	Anchor                string
}

// rootFolderID is the id of the user's My Drive root folder.
func rootFolderID(userID string) string {
	return "0A" + base64.RawURLEncoding.EncodeToString([]byte("root:"+userID))
}

// permissionID answers a stable Drive permission id of the user.
func permissionID(userID string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(userID))
	return strconv.FormatUint(h.Sum64()%1_000_000_000_000_000_000, 10)
}

// driveError answers Drive v3's error JSON (with the errors array the Go
// client exposes as googleapi.Error.Errors).
func driveError(w http.ResponseWriter, code int, reason, msg, location, locationType string) {
	item := map[string]any{"domain": "global", "reason": reason, "message": msg}
	if location != "" {
		item["location"], item["locationType"] = location, locationType
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "errors": []any{item}}})
}

func invalidParam(w http.ResponseWriter, msg, param string) {
	driveError(w, http.StatusBadRequest, "invalid", msg, param, "parameter")
}

func fileNotFound(w http.ResponseWriter, id string) {
	driveError(w, http.StatusNotFound, "notFound", "File not found: "+id+".", "fileId", "parameter")
}

// driveAuth checks the bearer token for a Drive method: 401 and 403 in
// Google's shape.
func (s *Server) driveAuth(w http.ResponseWriter, r *http.Request, scopes ...string) (oauth.Grant, bool) {
	g, status, err := s.cfg.Auth.Authenticate(r, scopes...)
	switch {
	case err == nil:
		return g, true
	case status == http.StatusForbidden:
		writeGFE(w, http.StatusForbidden, "PERMISSION_DENIED", "Request had insufficient authentication scopes.",
			"insufficientPermissions", "Insufficient Permission", "", "")
	default:
		writeGFE(w, http.StatusUnauthorized, "UNAUTHENTICATED",
			"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
			"authError", "Invalid Credentials", "Authorization", "header")
	}
	return g, false
}

// writeGFE answers the authentication errors of Google's front end: code,
// message, errors and status.
func writeGFE(w http.ResponseWriter, code int, status, msg, reason, itemMsg, location, locationType string) {
	item := map[string]any{"domain": "global", "reason": reason, "message": itemMsg}
	if location != "" {
		item["location"], item["locationType"] = location, locationType
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/", error="invalid_token"`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg,
		"errors": []any{item}, "status": status}})
}

// Scopes of the Drive methods.
var (
	driveReadScopes  = []string{ScopeDrive, ScopeDriveRO, ScopeDriveFile, ScopeDriveMeta, ScopeDriveMetaRO}
	driveWriteScopes = []string{ScopeDrive, ScopeDriveFile}
	// contentScopes read a file's content and comments (the metadata scopes
	// do not).
	contentScopes = []string{ScopeDrive, ScopeDriveRO, ScopeDriveFile}
)

// userName answers the display name of the user.
func (s *Server) userName(userID, email string) string {
	for _, u := range s.cfg.Users {
		if u.ID == userID && u.Name != "" {
			return u.Name
		}
	}
	local, _, _ := strings.Cut(email, "@")
	return local
}

func (s *Server) userEmail(userID, fallback string) string {
	for _, u := range s.cfg.Users {
		if u.ID == userID && u.Email != "" {
			return u.Email
		}
	}
	return fallback
}

const photoLink = "https://lh3.googleusercontent.com/a/default-user=s64"

func (s *Server) driveUser(userID, email string, me bool) map[string]any {
	return map[string]any{"kind": "drive#user", "displayName": s.userName(userID, email), "photoLink": photoLink,
		"me": me, "permissionId": permissionID(userID), "emailAddress": s.userEmail(userID, email)}
}

func rfc3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// sizeLocked answers the file's size in bytes (its text, UTF-8).
func (s *Server) sizeLocked(f *driveFile) int64 {
	if d, ok := s.docs[f.ID]; ok {
		return int64(len(d.Title) + len(bodyText(d)))
	}
	return 0
}

// fileJSON answers the file resource with every field the emulator keeps;
// the `fields` mask then selects.
func (s *Server) fileJSON(f *driveFile, g oauth.Grant) map[string]any {
	mine := f.Owner == g.UserID
	size := strconv.FormatInt(s.sizeLocked(f), 10)
	m := map[string]any{
		"kind": "drive#file", "id": f.ID, "name": f.Name, "mimeType": f.MimeType,
		"starred": f.Starred, "trashed": f.Trashed, "explicitlyTrashed": f.Trashed,
		"spaces": []any{"drive"}, "version": strconv.FormatInt(f.Modified.UnixMilli(), 10),
		"webViewLink":   "https://docs.google.com/document/d/" + f.ID + "/edit?usp=drivesdk",
		"iconLink":      "https://drive-thirdparty.googleusercontent.com/16/type/application/vnd.google-apps.document",
		"thumbnailLink": "https://docs.google.com/feeds/vt?id=" + f.ID,
		"createdTime":   rfc3339(f.Created), "modifiedTime": rfc3339(f.Modified),
		"viewedByMe": !f.ViewedBy[g.UserID].IsZero(), "modifiedByMe": !f.ModifiedBy[g.UserID].IsZero(),
		"shared": false, "ownedByMe": mine && f.DriveID == "", "isAppAuthorized": f.CreatedByClient == g.ClientID,
		"size": size, "quotaBytesUsed": size, "writersCanShare": true, "viewersCanCopyContent": true,
		"copyRequiresWriterPermission": false, "hasThumbnail": true,
		"lastModifyingUser": s.driveUser(f.LastModifier, f.LastModifierEmail, f.LastModifier == g.UserID),
		"exportLinks": map[string]any{
			"application/pdf": "https://docs.google.com/feeds/download/documents/export/Export?id=" + f.ID + "&exportFormat=pdf",
			"text/plain":      "https://docs.google.com/feeds/download/documents/export/Export?id=" + f.ID + "&exportFormat=txt",
			"text/markdown":   "https://docs.google.com/feeds/download/documents/export/Export?id=" + f.ID + "&exportFormat=md",
		},
		"capabilities": map[string]any{"canEdit": true, "canComment": true, "canRename": true, "canTrash": true,
			"canDelete": f.DriveID == "" && mine, "canDownload": true, "canCopy": true, "canShare": true,
			"canReadRevisions": true, "canUntrash": true, "canAddChildren": false},
	}
	if t := f.ViewedBy[g.UserID]; !t.IsZero() {
		m["viewedByMeTime"] = rfc3339(t)
	}
	if t := f.ModifiedBy[g.UserID]; !t.IsZero() {
		m["modifiedByMeTime"] = rfc3339(t)
	}
	if f.DriveID != "" {
		m["driveId"], m["teamDriveId"], m["parents"] = f.DriveID, f.DriveID, []any{f.DriveID}
	} else {
		m["parents"] = []any{rootFolderID(f.Owner)}
		m["owners"] = []any{s.driveUser(f.Owner, f.OwnerEmail, mine)}
	}
	return m
}

// fieldsFor parses the request's `fields` for the resource schema (def when
// absent); false after writing the 400.
func fieldsFor(w http.ResponseWriter, r *http.Request, schema reflect.Type, def string, required bool) (fieldMask, bool) {
	raw := r.URL.Query().Get("fields")
	if raw == "" {
		if required {
			driveError(w, http.StatusBadRequest, "required", "The 'fields' parameter is required for this method.", "fields", "parameter")
			return nil, false
		}
		raw = def
	}
	m, err := parseFields(raw, schema)
	if err != nil {
		driveError(w, http.StatusBadRequest, "invalidParameter", "Invalid field selection "+strings.TrimPrefix(err.Error(), errBadFields.Error()+" "),
			"fields", "parameter")
		return nil, false
	}
	return m, true
}

// queryBool parses a boolean query parameter; false after writing the 400.
func queryBool(w http.ResponseWriter, r *http.Request, name string) (bool, bool) {
	v := r.URL.Query().Get(name)
	b, err := parseBool(v)
	if err != nil {
		invalidParam(w, fmt.Sprintf("Invalid value '%s'. Values must be one of: [true, false]", v), name)
		return false, false
	}
	return b, true
}

// pageSize parses pageSize in [1, max] (def when absent).
func pageSize(w http.ResponseWriter, r *http.Request, def, max int) (int, bool) {
	v := r.URL.Query().Get("pageSize")
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		invalidParam(w, fmt.Sprintf("Invalid value '%s'. Values must be within the range: [1, %d]", v, max), "pageSize")
		return 0, false
	}
	return n, true
}

// pageToken answers an opaque token for the offset, bound to the query
// (binding: every parameter that shapes the result set) by an HMAC.
func (s *Server) pageToken(binding string, offset int) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(offset))
	mac := hmac.New(sha256.New, s.pageKey)
	mac.Write(b)
	mac.Write([]byte(binding))
	return base64.RawURLEncoding.EncodeToString(append(b, mac.Sum(nil)[:16]...))
}

// pageOffset answers the offset of a token made by pageToken for the same
// binding; false after writing the 400.
func (s *Server) pageOffset(w http.ResponseWriter, binding, tok string) (int, bool) {
	if tok == "" {
		return 0, true
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil && len(raw) == 24 {
		off := binary.BigEndian.Uint64(raw[:8])
		if hmac.Equal([]byte(s.pageToken(binding, int(off))), []byte(tok)) && off <= 1<<31 {
			return int(off), true
		}
	}
	invalidParam(w, "Invalid Value", "pageToken")
	return 0, false
}

// orderKeys are the files.list orderBy keys.
var orderKeys = map[string]bool{"createdTime": true, "folder": true, "modifiedByMeTime": true, "modifiedTime": true,
	"name": true, "name_natural": true, "quotaBytesUsed": true, "recency": true, "sharedWithMeTime": true,
	"starred": true, "viewedByMeTime": true}

type orderKey struct {
	key  string
	desc bool
}

func parseOrderBy(v string) ([]orderKey, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []orderKey
	for _, part := range strings.Split(v, ",") {
		f := strings.Fields(part)
		if len(f) == 0 || len(f) > 2 || !orderKeys[f[0]] || len(f) == 2 && !strings.EqualFold(f[1], "desc") && !strings.EqualFold(f[1], "asc") {
			return nil, fmt.Errorf("google emulator: bad orderBy %q", part)
		}
		out = append(out, orderKey{f[0], len(f) == 2 && strings.EqualFold(f[1], "desc")})
	}
	return out, nil
}

// compareFiles orders two files by one key (ascending) for the user me;
// sizes holds their quotaBytesUsed.
func compareFiles(a, b *driveFile, key, me string, sizes map[string]int64) int {
	switch key {
	case "createdTime":
		return a.Created.Compare(b.Created)
	case "modifiedTime":
		return a.Modified.Compare(b.Modified)
	case "modifiedByMeTime":
		return a.ModifiedBy[me].Compare(b.ModifiedBy[me])
	case "viewedByMeTime":
		return a.ViewedBy[me].Compare(b.ViewedBy[me])
	case "recency":
		return recency(a, me).Compare(recency(b, me))
	case "name":
		return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	case "name_natural":
		return naturalCompare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	case "quotaBytesUsed":
		return cmpInt(sizes[a.ID], sizes[b.ID])
	case "starred":
		return cmpBool(a.Starred, b.Starred)
	}
	return 0 // folder, sharedWithMeTime: equal for documents the user owns
}

// recency is the latest of the file's times for the user.
func recency(f *driveFile, me string) time.Time {
	t := f.Modified
	for _, u := range []time.Time{f.ModifiedBy[me], f.ViewedBy[me], f.Created} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// naturalCompare orders digit runs by value ("doc 9" < "doc 10").
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmpInt(int64(len(na)), int64(len(nb))); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		ra, sa := utf8.DecodeRuneInString(a)
		rb, sb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmpInt(int64(ra), int64(rb))
		}
		a, b = a[sa:], b[sb:]
	}
	return cmpInt(int64(len(a)), int64(len(b)))
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// listFiles is GET /drive/v3/files.
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveReadScopes...)
	if !ok {
		return
	}
	q := r.URL.Query()
	mask, ok := fieldsFor(w, r, reflect.TypeFor[drive.FileList](), "kind,incompleteSearch,files(kind,id,name,mimeType),nextPageToken", false)
	if !ok {
		return
	}
	query, err := parseQuery(q.Get("q"))
	if err != nil {
		invalidParam(w, "Invalid Value", "q")
		return
	}
	order, err := parseOrderBy(q.Get("orderBy"))
	if err != nil {
		invalidParam(w, "Invalid Value", "orderBy")
		return
	}
	if order != nil && queryHasFullText(query) {
		driveError(w, http.StatusBadRequest, "badRequest",
			"Sorting is not supported for queries with fullText terms. Results are always in descending relevance order.", "orderBy", "parameter")
		return
	}
	size, ok := pageSize(w, r, 100, 1000)
	if !ok {
		return
	}
	allDrives, ok := queryBool(w, r, "includeItemsFromAllDrives")
	if !ok {
		return
	}
	if _, ok := queryBool(w, r, "supportsAllDrives"); !ok {
		return
	}
	corpora, driveID := q.Get("corpora"), q.Get("driveId")
	if corpora == "" {
		corpora = "user"
	}
	switch {
	case corpora != "user" && corpora != "domain" && corpora != "drive" && corpora != "allDrives":
		invalidParam(w, "Invalid Value", "corpora")
		return
	case (driveID != "" || corpora == "drive" || corpora == "allDrives") && !allDrives:
		driveError(w, http.StatusForbidden, "forbidden", "The includeItemsFromAllDrives parameter must be set to true when driveId is specified or corpora contains drive or allDrives.",
			"includeItemsFromAllDrives", "parameter")
		return
	case (corpora == "drive") != (driveID != ""):
		driveError(w, http.StatusBadRequest, "teamDriveIdRequiresTeamDriveCorpora", "The driveId parameter must be specified if and only if corpora is set to drive.", "", "")
		return
	}
	if sp := q.Get("spaces"); sp != "" && sp != "drive" {
		for _, v := range strings.Split(sp, ",") {
			if v != "drive" && v != "appDataFolder" {
				invalidParam(w, "Invalid Value", "spaces")
				return
			}
		}
	}
	binding := strings.Join([]string{"files", g.UserID, g.ClientID, q.Get("q"), q.Get("orderBy"), corpora, driveID,
		strconv.FormatBool(allDrives), q.Get("spaces"), strconv.Itoa(size)}, "\x00")
	offset, ok := s.pageOffset(w, binding, q.Get("pageToken"))
	if !ok {
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if corpora == "drive" {
		sd, ok := s.drives[driveID]
		if !ok || !sd.Members[g.UserID] {
			driveError(w, http.StatusNotFound, "notFound", "Shared drive not found: "+driveID, "driveId", "parameter")
			return
		}
	}
	s.syncFilesLocked()
	var hits []*driveFile
	relevance := map[string]int{}
	for _, f := range s.files {
		if !s.allowedLocked(g, f, readMeta) {
			continue
		}
		switch {
		case corpora == "drive" && f.DriveID != driveID:
			continue
		case corpora == "user" || corpora == "domain":
			if f.DriveID != "" && !allDrives {
				continue
			}
		}
		if q.Get("spaces") == "appDataFolder" {
			continue // documents are never in the app data folder
		}
		if query != nil {
			var text *string
			c := &qCtx{f: f, userID: g.UserID, userEmail: g.Email, text: func() string {
				if text == nil {
					t := ""
					if d, ok := s.docs[f.ID]; ok {
						t = bodyText(d)
					}
					text = &t
				}
				return *text
			}}
			if !query.eval(c) {
				continue
			}
			if queryHasFullText(query) {
				relevance[f.ID] = relevanceOf(query, strings.ToLower(f.Name+"\n"+c.text()))
			}
		}
		hits = append(hits, f)
	}
	if order == nil {
		order = []orderKey{{"folder", false}, {"modifiedTime", true}, {"name", false}}
	}
	sizes := map[string]int64{} // quotaBytesUsed renders the text: once per file
	if slices.ContainsFunc(order, func(k orderKey) bool { return k.key == "quotaBytesUsed" }) {
		for _, f := range hits {
			sizes[f.ID] = s.sizeLocked(f)
		}
	}
	slices.SortFunc(hits, func(a, b *driveFile) int {
		// fullText: descending relevance (occurrences of the terms), as
		// Google, then the default order.
		if c := cmpInt(int64(relevance[b.ID]), int64(relevance[a.ID])); c != 0 {
			return c
		}
		for _, k := range order {
			c := compareFiles(a, b, k.key, g.UserID, sizes)
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := map[string]any{"kind": "drive#fileList", "incompleteSearch": false}
	if offset > len(hits) {
		offset = len(hits)
	}
	end := min(offset+size, len(hits))
	files := make([]any, 0, end-offset)
	for _, f := range hits[offset:end] {
		files = append(files, s.fileJSON(f, g))
	}
	out["files"] = files
	if end < len(hits) {
		out["nextPageToken"] = s.pageToken(binding, end)
	}
	writeJSON(w, mask.apply(out))
}

// visibleFileLocked answers the file if the grant may access it so; else
// writes 404 when the file does not exist for the caller, 403
// insufficientFilePermissions when it may only read it.
// A shared-drive file is found by a files method only with
// supportsAllDrives=true (allDrives), as Google does.
func (s *Server) visibleFileLocked(w http.ResponseWriter, id string, g oauth.Grant, allDrives bool, a access) (*driveFile, bool) {
	f, ok := s.fileLocked(id)
	if !ok || !s.allowedLocked(g, f, readOf(a)) || f.DriveID != "" && !allDrives {
		fileNotFound(w, id)
		return nil, false
	}
	if !s.allowedLocked(g, f, a) {
		driveError(w, http.StatusForbidden, "insufficientFilePermissions", "The user does not have sufficient permissions for this file.", "", "")
		return nil, false
	}
	return f, true
}

// getFile is GET /drive/v3/files/{id}.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveReadScopes...)
	if !ok {
		return
	}
	mask, ok := fieldsFor(w, r, reflect.TypeFor[drive.File](), "kind,id,name,mimeType", false)
	if !ok {
		return
	}
	allDrives, ok := queryBool(w, r, "supportsAllDrives")
	if !ok {
		return
	}
	if r.URL.Query().Get("alt") == "media" {
		driveError(w, http.StatusForbidden, "fileNotDownloadable",
			"Only files with binary content can be downloaded. Use Export with Docs Editors files.", "alt", "parameter")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.visibleFileLocked(w, r.PathValue("id"), g, allDrives, readMeta)
	if !ok {
		return
	}
	writeJSON(w, mask.apply(s.fileJSON(f, g)))
}

// writable fields of files.update the emulator applies; the other fields of
// the File schema are refused as not writable (403 fieldNotWritable).
var writableFileFields = map[string]bool{"name": true, "starred": true, "trashed": true, "description": true}

// patchFile is PATCH /drive/v3/files/{id} (files.update): name, starred, trashed.
func (s *Server) patchFile(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveWriteScopes...)
	if !ok {
		return
	}
	mask, ok := fieldsFor(w, r, reflect.TypeFor[drive.File](), "kind,id,name,mimeType", false)
	if !ok {
		return
	}
	allDrives, ok := queryBool(w, r, "supportsAllDrives")
	if !ok {
		return
	}
	var in map[string]json.RawMessage
	if !s.readJSON(w, r, &in) {
		return
	}
	var name *string
	var starred, trashed *bool
	for k, raw := range in {
		if _, known := jsonField(reflect.TypeFor[drive.File](), k); !known {
			invalidParam(w, fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot find field.", k), "")
			return
		}
		if !writableFileFields[k] {
			driveError(w, http.StatusForbidden, "fieldNotWritable", "The resource body includes fields which are not directly writable.", "", "")
			return
		}
		var err error
		switch k {
		case "name":
			err = json.Unmarshal(raw, &name)
		case "starred":
			err = json.Unmarshal(raw, &starred)
		case "trashed":
			err = json.Unmarshal(raw, &trashed)
		}
		if err != nil {
			invalidParam(w, fmt.Sprintf("Invalid value at 'resource.%s': %v", k, err), "")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.visibleFileLocked(w, r.PathValue("id"), g, allDrives, writeMeta)
	if !ok {
		return
	}
	if name != nil {
		if strings.TrimSpace(*name) == "" {
			invalidParam(w, "The file name must not be empty.", "name")
			return
		}
		f.Name = *name
		if d, ok := s.docs[f.ID]; ok {
			d.Title = *name
		}
		s.touchLocked(f, g)
	}
	if starred != nil {
		f.Starred = *starred
	}
	if trashed != nil {
		f.Trashed = *trashed
	}
	writeJSON(w, mask.apply(s.fileJSON(f, g)))
}

// deleteFile is DELETE /drive/v3/files/{id}: permanent, skipping the trash.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveWriteScopes...)
	if !ok {
		return
	}
	allDrives, ok := queryBool(w, r, "supportsAllDrives")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.visibleFileLocked(w, r.PathValue("id"), g, allDrives, writeMeta)
	if !ok {
		return
	}
	if f.DriveID == "" && f.Owner != g.UserID {
		driveError(w, http.StatusForbidden, "insufficientFilePermissions", "The user does not have sufficient permissions for this file.", "", "")
		return
	}
	delete(s.files, f.ID)
	delete(s.docs, f.ID)
	for k := range s.granted {
		if k.file == f.ID {
			delete(s.granted, k)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// getAbout is GET /drive/v3/about (fields required).
func (s *Server) getAbout(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveReadScopes...)
	if !ok {
		return
	}
	mask, ok := fieldsFor(w, r, reflect.TypeFor[drive.About](), "", true)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncFilesLocked()
	var usage, trash int64
	for _, f := range s.files {
		if f.Owner == g.UserID && f.DriveID == "" {
			n := s.sizeLocked(f)
			usage += n
			if f.Trashed {
				trash += n
			}
		}
	}
	out := map[string]any{"kind": "drive#about", "user": s.driveUser(g.UserID, g.Email, true),
		"storageQuota": map[string]any{"limit": "16106127360", "usage": strconv.FormatInt(usage, 10),
			"usageInDrive": strconv.FormatInt(usage, 10), "usageInDriveTrash": strconv.FormatInt(trash, 10)},
		"canCreateDrives": true, "maxUploadSize": "5242880000000", "appInstalled": false,
		"importFormats": map[string]any{"text/plain": []any{MimeTypeDocument}, "text/markdown": []any{MimeTypeDocument}},
		"exportFormats": map[string]any{MimeTypeDocument: []any{"application/pdf", "text/plain", "text/markdown"}}}
	writeJSON(w, mask.apply(out))
}

func (s *Server) commentJSON(c *comment, g oauth.Grant) map[string]any {
	m := map[string]any{"kind": "drive#comment", "id": c.ID, "createdTime": rfc3339(c.Created),
		"modifiedTime": rfc3339(c.Modified), "deleted": c.Deleted, "resolved": c.Resolved, "replies": []any{},
		"author": s.driveUser(c.AuthorID, c.AuthorEmail, c.AuthorID == g.UserID)}
	if !c.Deleted { // Google drops a deleted comment's content
		m["content"], m["htmlContent"] = c.Content, htmlContent(c.Content)
	}
	if c.Anchor != "" {
		m["anchor"] = c.Anchor
	}
	if c.QuotedValue != "" {
		m["quotedFileContent"] = map[string]any{"mimeType": c.QuotedMT, "value": c.QuotedValue}
	}
	return m
}

// htmlContent renders a comment's plain text as Google does: escaped, line
// breaks as <br>.
func htmlContent(s string) string {
	return strings.ReplaceAll(html.EscapeString(s), "\n", "<br>")
}

// commentFileLocked answers the file of a comments call or writes the error.
func (s *Server) commentFileLocked(w http.ResponseWriter, r *http.Request, g oauth.Grant, a access) (*driveFile, bool) {
	return s.visibleFileLocked(w, r.PathValue("id"), g, true, a) // comments take no supportsAllDrives
}

func commentNotFound(w http.ResponseWriter, id string) {
	driveError(w, http.StatusNotFound, "notFound", "Comment not found: "+id+".", "commentId", "parameter")
}

// listComments is GET /drive/v3/files/{id}/comments (fields required).
func (s *Server) listComments(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, contentScopes...)
	if !ok {
		return
	}
	mask, ok := fieldsFor(w, r, reflect.TypeFor[drive.CommentList](), "", true)
	if !ok {
		return
	}
	includeDeleted, ok := queryBool(w, r, "includeDeleted")
	if !ok {
		return
	}
	size, ok := pageSize(w, r, 20, 100)
	if !ok {
		return
	}
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("startModifiedTime"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			invalidParam(w, "Invalid Value", "startModifiedTime")
			return
		}
		since = t
	}
	binding := strings.Join([]string{"comments", g.UserID, r.PathValue("id"), strconv.FormatBool(includeDeleted),
		q.Get("startModifiedTime"), strconv.Itoa(size)}, "\x00")
	offset, ok := s.pageOffset(w, binding, q.Get("pageToken"))
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.commentFileLocked(w, r, g, readContent)
	if !ok {
		return
	}
	var hits []*comment
	for _, c := range f.Comments {
		if (includeDeleted || !c.Deleted) && !c.Modified.Before(since) {
			hits = append(hits, c)
		}
	}
	offset = min(offset, len(hits))
	end := min(offset+size, len(hits))
	list := make([]any, 0, end-offset)
	for _, c := range hits[offset:end] {
		list = append(list, s.commentJSON(c, g))
	}
	out := map[string]any{"kind": "drive#commentList", "comments": list}
	if end < len(hits) {
		out["nextPageToken"] = s.pageToken(binding, end)
	}
	writeJSON(w, mask.apply(out))
}

// createComment is POST /drive/v3/files/{id}/comments (fields required).
func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveWriteScopes...)
	if !ok {
		return
	}
	mask, ok := fieldsFor(w, r, reflect.TypeFor[drive.Comment](), "", true)
	if !ok {
		return
	}
	var in drive.Comment
	if !s.readJSON(w, r, &in) {
		return
	}
	if strings.TrimSpace(in.Content) == "" {
		driveError(w, http.StatusBadRequest, "required", "Required: content", "content", "other")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.commentFileLocked(w, r, g, writeContent)
	if !ok {
		return
	}
	s.nextCID++
	now := s.now()
	c := &comment{ID: "AAAA" + strconv.FormatInt(s.nextCID, 10), Content: in.Content, AuthorID: g.UserID,
		AuthorEmail: g.Email, Created: now, Modified: now, Anchor: in.Anchor}
	if in.QuotedFileContent != nil {
		c.QuotedValue, c.QuotedMT = in.QuotedFileContent.Value, in.QuotedFileContent.MimeType
		if c.QuotedMT == "" {
			c.QuotedMT = "text/html"
		}
	}
	f.Comments = append(f.Comments, c)
	writeJSON(w, mask.apply(s.commentJSON(c, g)))
}

func (s *Server) findComment(f *driveFile, id string) *comment {
	for _, c := range f.Comments {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// getComment is GET /drive/v3/files/{id}/comments/{cid} (fields required).
func (s *Server) getComment(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, contentScopes...)
	if !ok {
		return
	}
	mask, ok := fieldsFor(w, r, reflect.TypeFor[drive.Comment](), "", true)
	if !ok {
		return
	}
	includeDeleted, ok := queryBool(w, r, "includeDeleted")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.commentFileLocked(w, r, g, readContent)
	if !ok {
		return
	}
	c := s.findComment(f, r.PathValue("cid"))
	if c == nil || c.Deleted && !includeDeleted {
		commentNotFound(w, r.PathValue("cid"))
		return
	}
	writeJSON(w, mask.apply(s.commentJSON(c, g)))
}

// deleteComment is DELETE /drive/v3/files/{id}/comments/{cid}: the comment
// stays, marked deleted (listed with includeDeleted).
func (s *Server) deleteComment(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, driveWriteScopes...)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.commentFileLocked(w, r, g, writeContent)
	if !ok {
		return
	}
	c := s.findComment(f, r.PathValue("cid"))
	if c == nil || c.Deleted {
		commentNotFound(w, r.PathValue("cid"))
		return
	}
	if c.AuthorID != g.UserID && f.Owner != g.UserID {
		driveError(w, http.StatusForbidden, "insufficientFilePermissions", "The user does not have sufficient permissions for this comment.", "", "")
		return
	}
	c.Deleted, c.Modified = true, s.now()
	w.WriteHeader(http.StatusNoContent)
}
