package graph

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/auditrail/auditrail/internal/emulators/graph/odata"
)

// page is a list's $top, $skip and $count.
type page struct {
	top, skip int
	count     bool
}

// queryParam answers the value of the OData option name ("$top"); Graph
// v1.0 also accepts it without the dollar.
func queryParam(r *http.Request, name string) (string, bool) {
	q := r.URL.Query()
	if v, ok := q[name]; ok {
		return v[0], true
	}
	if v, ok := q[strings.TrimPrefix(name, "$")]; ok {
		return v[0], true
	}
	return "", false
}

func parsePage(w http.ResponseWriter, r *http.Request, defTop, maxTop int) (page, bool) {
	p := page{top: defTop}
	if v, ok := queryParam(r, "$top"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Invalid value '%s' for $top query option found. The $top query option requires a non-negative integer value.", v))
			return p, false
		}
		if n > maxTop {
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("The limit of '%d' for Top query has been exceeded. The value from the incoming request is '%d'.", maxTop, n))
			return p, false
		}
		p.top = n
	}
	if v, ok := queryParam(r, "$skip"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Invalid value '%s' for $skip query option found. The $skip query option requires a non-negative integer value.", v))
			return p, false
		}
		p.skip = n
	}
	if v, ok := queryParam(r, "$count"); ok {
		switch strings.ToLower(v) {
		case "true":
			p.count = true
		case "false":
		default:
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("'%s' is not a valid count option.", v))
			return p, false
		}
	}
	return p, true
}

// window answers the [from, to) of the page over n items and whether more follow.
func (p page) window(n int) (int, int, bool) {
	from := min(p.skip, n)
	to := min(from+p.top, n)
	return from, to, to < n && p.top > 0
}

// nextLink answers the absolute URL of the next page: the request's own
// path and options with $skip advanced.
func nextLink(r *http.Request, skip int) string {
	q := url.Values{}
	for k, v := range r.URL.Query() {
		if k == "$skip" || k == "skip" {
			continue
		}
		q[k] = v
	}
	q.Set("$skip", strconv.Itoa(skip))
	return baseURL(r) + r.URL.Path + "?" + q.Encode()
}

// collection answers a Graph collection response.
func collection(r *http.Request, context string, items []any, total int, p page, more bool) map[string]any {
	out := map[string]any{"@odata.context": baseURL(r) + "/$metadata#" + context}
	if p.count {
		out["@odata.count"] = total
	}
	out["value"] = items
	if more {
		out["@odata.nextLink"] = nextLink(r, p.skip+p.top)
	}
	return out
}

// folderLocked resolves a folder segment: a well-known name (any case) or
// an id of the mailbox. An unknown name that is not a well-formed id
// answers 400 ErrorInvalidIdMalformed, as Graph does for e.g. "starred".
func (s *Server) folderLocked(w http.ResponseWriter, r *http.Request, mb *mailbox, seg string) (*folder, bool) {
	if wellKnownNames[strings.ToLower(seg)] {
		f, ok := mb.wellKnown[strings.ToLower(seg)]
		if !ok {
			writeError(w, r, http.StatusNotFound, CodeItemNotFound, msgItemNotFound)
		}
		return f, ok
	}
	if !wellFormed(seg) {
		writeError(w, r, http.StatusBadRequest, CodeInvalidIDMalformed, msgMalformedID)
		return nil, false
	}
	f, ok := s.folderIDs[seg]
	if !ok || f.mb != mb {
		writeError(w, r, http.StatusNotFound, CodeItemNotFound, msgItemNotFound)
		return nil, false
	}
	return f, true
}

func (f *folder) unread() int {
	n := 0
	for _, m := range f.msgs {
		if !m.isRead {
			n++
		}
	}
	return n
}

func (f *folder) size() int {
	n := 0
	for _, m := range f.msgs {
		n += len(m.body.Content) + len(m.subject) + 512
		for _, a := range m.attachments {
			n += a.size()
		}
	}
	return n
}

func (f *folder) json() map[string]any {
	parent := ""
	if f.parent != nil {
		parent = f.parent.id
	}
	return map[string]any{
		"id":               f.id,
		"displayName":      f.name,
		"parentFolderId":   nilIfEmpty(parent),
		"childFolderCount": float64(len(f.children)),
		"unreadItemCount":  float64(f.unread()),
		"totalItemCount":   float64(len(f.msgs)),
		"sizeInBytes":      float64(f.size()),
		"isHidden":         f.hidden,
	}
}

var folderProps = []string{"id", "displayName", "parentFolderId", "childFolderCount", "unreadItemCount", "totalItemCount", "sizeInBytes", "isHidden"}

// parseSelect answers the $select list (nil for all), checked against props.
func parseSelect(w http.ResponseWriter, r *http.Request, props []string, typeName string) ([]string, bool) {
	v, ok := queryParam(r, "$select")
	if !ok || strings.TrimSpace(v) == "" {
		return nil, true
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "*" {
			return nil, true
		}
		if !slices.Contains(props, p) {
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Could not find a property named '%s' on type '%s'.", p, typeName))
			return nil, false
		}
		out = append(out, p)
	}
	return out, true
}

func selectFolder(f map[string]any, sel []string) map[string]any {
	if sel == nil {
		return f
	}
	out := map[string]any{"id": f["id"]}
	for _, k := range sel {
		out[k] = f[k]
	}
	return out
}

func (s *Server) listFolders(w http.ResponseWriter, r *http.Request) {
	s.listFolderChildren(w, r, "")
}

func (s *Server) listChildFolders(w http.ResponseWriter, r *http.Request) {
	s.listFolderChildren(w, r, r.PathValue("fid"))
}

func (s *Server) listFolderChildren(w http.ResponseWriter, r *http.Request, fid string) {
	g, ok := s.auth(w, r, ScopeMailRead, ScopeMailReadWrite)
	if !ok {
		return
	}
	p, ok := parsePage(w, r, 10, s.cfg.MaxTop)
	if !ok {
		return
	}
	sel, ok := parseSelect(w, r, folderProps, "microsoft.graph.mailFolder")
	if !ok {
		return
	}
	hidden := false
	if v, ok := queryParam(r, "includeHiddenFolders"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("The parameter 'includeHiddenFolders' has an invalid value '%s'.", v))
			return
		}
		hidden = b
	}
	var filter *odata.Filter
	if v, ok := queryParam(r, "$filter"); ok {
		f, err := odata.ParseFilterFor(v, odata.MailFolder)
		if err != nil {
			oe := asODataError(err)
			writeError(w, r, http.StatusBadRequest, oe.Code, oe.Message)
			return
		}
		filter = f
	}
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	parent := mb.root
	if fid != "" {
		f, ok := s.folderLocked(w, r, mb, fid)
		if !ok {
			s.mu.Unlock()
			return
		}
		parent = f
	}
	var all []map[string]any
	for _, c := range parent.children {
		if j := c.json(); (hidden || !c.hidden) && (filter == nil || filter.Match(j)) {
			all = append(all, j)
		}
	}
	slices.SortStableFunc(all, func(a, b map[string]any) int {
		return strings.Compare(strings.ToLower(a["displayName"].(string)), strings.ToLower(b["displayName"].(string)))
	})
	from, to, more := p.window(len(all))
	items := make([]any, 0, to-from)
	for _, f := range all[from:to] {
		items = append(items, selectFolder(f, sel))
	}
	ctx := fmt.Sprintf("users('%s')/mailFolders", url.PathEscape(userGUID(g.UserID)))
	if fid != "" {
		ctx = fmt.Sprintf("users('%s')/mailFolders('%s')/childFolders", url.PathEscape(userGUID(g.UserID)), url.PathEscape(parent.id))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, collection(r, ctx, items, len(all), p, more))
}

func (s *Server) getFolder(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailRead, ScopeMailReadWrite)
	if !ok {
		return
	}
	sel, ok := parseSelect(w, r, folderProps, "microsoft.graph.mailFolder")
	if !ok {
		return
	}
	s.mu.Lock()
	f, ok := s.folderLocked(w, r, s.mailboxLocked(g), r.PathValue("fid"))
	var out map[string]any
	if ok {
		out = selectFolder(f.json(), sel)
		out["@odata.context"] = fmt.Sprintf("%s/$metadata#users('%s')/mailFolders/$entity", baseURL(r), url.PathEscape(userGUID(g.UserID)))
	}
	s.mu.Unlock()
	if ok {
		writeJSON(w, http.StatusOK, out)
	}
}
