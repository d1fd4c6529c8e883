package mail

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/auditrail/auditrail/internal/pagetoken"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// tokenPurpose starts the toolkit's pagination tokens (version 2: signed,
// internal/pagetoken).
const tokenPurpose = "mtk2"

// binding is what a token is bound to: the user, the API base, the tool
// and its inputs other than the token.
func binding(user, base, tool string, inputs map[string]any) string {
	in := make(map[string]any, len(inputs))
	for k, v := range inputs {
		if k != "pagination_token" {
			in[k] = v
		}
	}
	b, _ := json.Marshal([]any{user, base, tool, in}) // map keys sorted
	return string(b)
}

// encodeToken seals the relative next link of a listing bound to bind;
// "" when there is none.
func (t *Toolkit) encodeToken(bind, next string) (string, error) {
	tok, err := t.tokens.Seal([]byte(bind), []byte(next))
	if err != nil {
		return "", &upstreamError{invalidAnswer("Microsoft Graph answered a next-page link too long to hand on"), err}
	}
	return tok, nil
}

// decodeToken answers the relative next link of a token the toolkit sealed
// for bind, when it is a link l itself follows (followable): a token of
// another key, user, query or tool, or one holding anything else, is
// refused.
func (t *Toolkit) decodeToken(tok, bind string, l listing) (string, error) {
	p, err := t.tokens.Open(tok, []byte(bind))
	switch {
	case errors.Is(err, pagetoken.ErrBinding):
		return "", invalid("pagination_token: it continues a listing with other parameters (or of another user); repeat that listing's parameters exactly, or leave pagination_token out to start again")
	case err != nil || !l.followable(string(p)):
		return "", invalid("pagination_token: not a token of this listing; pass the pagination_token of the previous answer as is, with the same other parameters")
	}
	return string(p), nil
}

// nextToken turns Graph's @odata.nextLink into a token; a link outside the
// API base (graphapi.ErrForeignLink) or not of the listing's own shape is
// refused: it is never followed.
func (t *Toolkit) nextToken(c *graphapi.Client, l listing, bind, nextLink string) (string, error) {
	if nextLink == "" {
		return "", nil
	}
	rel, err := c.Relative(nextLink)
	if err != nil {
		return "", err
	}
	if !l.followable(rel) {
		return "", fmt.Errorf("%w: not a next page of %s", graphapi.ErrForeignLink, l.collection)
	}
	return t.encodeToken(bind, rel)
}

// followable reports whether rel (a path and query relative to the API
// base) is a next page of the listing: its path is the collection the
// listing requests (Graph may spell a key segment name('id')), and its
// query holds only the parameters the listing sets, with the values it
// sets, and Graph's paging parameters $skip and $skiptoken.
func (l listing) followable(rel string) bool {
	p, rawQuery, _ := strings.Cut(rel, "?")
	if p != l.collection && canonicalPath(p) != canonicalPath(l.collection) {
		return false
	}
	got, err := url.ParseQuery(rawQuery)
	if err != nil {
		return false
	}
	own, _ := url.ParseQuery(l.query.Encode())
	for k, vs := range got {
		if len(vs) != 1 {
			return false
		}
		switch k {
		case "$skip":
			if n, err := strconv.Atoi(vs[0]); err != nil || n < 0 {
				return false
			}
		case "$skiptoken":
			if vs[0] == "" {
				return false
			}
		default:
			if w := own[k]; len(w) != 1 || w[0] != vs[0] {
				return false
			}
		}
	}
	return true
}

// canonicalPath unescapes a path's segments and writes Graph's key
// segments name('id') as name/id; "" when a segment does not unescape.
func canonicalPath(p string) string {
	var out []string
	for _, seg := range strings.Split(p, "/") {
		u, err := url.PathUnescape(seg)
		if err != nil {
			return ""
		}
		if i := strings.Index(u, "('"); i > 0 && strings.HasSuffix(u, "')") && len(u) >= i+4 {
			out = append(out, u[:i], strings.ReplaceAll(u[i+2:len(u)-2], "''", "'"))
			continue
		}
		out = append(out, u)
	}
	return strings.Join(out, "/")
}
