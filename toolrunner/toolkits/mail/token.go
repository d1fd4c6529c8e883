package mail

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// tokenPrefix marks the toolkit's pagination tokens (version 1).
const tokenPrefix = "mtk1."

// maxTokenLen bounds what the decoder reads.
const maxTokenLen = 8 << 10

// pageToken is what a pagination token holds: the binding of the query it
// continues, and the path and query of Graph's next link relative to the
// API base (never a host: the host is always the connection's).
type pageToken struct {
	Binding string `json:"b"`
	Next    string `json:"n"`
}

// binding hashes what a token is bound to: the user, the API base, the
// tool and its inputs other than the token.
func binding(user, base, tool string, inputs map[string]any) string {
	in := make(map[string]any, len(inputs))
	for k, v := range inputs {
		if k != "pagination_token" {
			in[k] = v
		}
	}
	b, _ := json.Marshal([]any{user, base, tool, in}) // map keys sorted
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// encodeToken makes a token of Graph's next link; "" when there is none.
func encodeToken(bind, next string) string {
	if next == "" {
		return ""
	}
	b, _ := json.Marshal(pageToken{Binding: bind, Next: next})
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken answers the relative next link of a token made for bind on
// the collection at collection (a path such as /me/messages; Graph may
// spell the path of its next links otherwise, /me/mailFolders('Inbox')/…,
// so the kind of collection, its last segment, is what is compared): a
// token of another user, query, tool or kind of collection, or one that is
// not the toolkit's, is refused.
func decodeToken(tok, bind, collection string) (string, error) {
	bad := invalid("pagination_token: not a token of this listing; pass the pagination_token of the previous answer as is, with the same other parameters")
	if len(tok) > maxTokenLen || !strings.HasPrefix(tok, tokenPrefix) {
		return "", bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok[len(tokenPrefix):])
	if err != nil {
		return "", bad
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var pt pageToken
	if dec.Decode(&pt) != nil || dec.More() || pt.Next == "" {
		return "", bad
	}
	if pt.Binding != bind {
		return "", invalid("pagination_token: it continues a listing with other parameters (or of another user); repeat that listing's parameters exactly, or leave pagination_token out to start again")
	}
	p, _, _ := strings.Cut(pt.Next, "?")
	if !strings.HasSuffix(p, collection[strings.LastIndex(collection, "/"):]) {
		return "", bad
	}
	return pt.Next, nil
}

// nextToken turns Graph's @odata.nextLink into a token; a link outside the
// API base is refused (graphapi.ErrForeignLink): it is never followed.
func nextToken(c *graphapi.Client, bind, nextLink string) (string, error) {
	if nextLink == "" {
		return "", nil
	}
	rel, err := c.Relative(nextLink)
	if err != nil {
		return "", err
	}
	return encodeToken(bind, rel), nil
}
