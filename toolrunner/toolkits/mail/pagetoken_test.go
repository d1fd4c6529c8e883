package mail

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/pagetoken"
)

// TestForgedPageTokens: a caller cannot make a token reach another
// mailbox or carry its own $filter: an unkeyed token (what version 1
// was), a genuine token re-encoded with another path and a $filter, a
// token signed with another key, and even a token signed with the
// toolkit's own key whose link is not of the listing's shape are input
// errors, and none reaches Graph. Keys rotate: with [new, old] a token
// signed with old continues; an instance without new refuses new tokens.
func TestForgedPageTokens(t *testing.T) {
	e := newEnv(t)
	oldKey, newKey := []byte("old page token key 0123"), []byte("new page token key 0123")
	sealer := func(keys ...[]byte) *pagetoken.Sealer {
		s, err := pagetoken.New(tokenPurpose, keys)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	in := func(tok string) map[string]any {
		m := map[string]any{"well_known_folder_name": "inbox", "limit": 2}
		if tok != "" {
			m["pagination_token"] = tok
		}
		return m
	}
	e.tk.tokens = sealer(oldKey)
	first := e.ok(t, "ListEmailsInFolder", in(""))
	tok, _ := first["pagination_token"].(string)
	if tok == "" {
		t.Fatal("no second page")
	}
	evilRel := "/users/other@contoso.com/mailFolders/inbox/messages?$filter=" + "subject%20ne%20''" + "&$top=2&$skip=2"

	// Re-encoded: the genuine token's payload with another path and a filter.
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, tokenPurpose+"."))
	if err != nil {
		t.Fatal(err)
	}
	body := append(append([]byte{}, raw[:17]...), evilRel...)
	reencoded := tokenPurpose + "." + base64.RawURLEncoding.EncodeToString(append(body, raw[len(raw)-16:]...))
	// Version 1: an unkeyed hash of what the caller knows, and the link.
	v1, _ := json.Marshal(map[string]string{"b": "anything", "n": evilRel})
	unkeyed := "mtk1." + base64.RawURLEncoding.EncodeToString(v1)
	bind := binding("u1", e.api, "ListEmailsInFolder", map[string]any{"well_known_folder_name": "inbox", "limit": int64(2),
		"sort_by": "receivedDateTime", "sort_order": "descending"})
	signedEvil, err := e.tk.encodeToken(bind, evilRel)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := sealer([]byte("some other key of 16+ bytes")).Seal([]byte(bind), []byte(strings.SplitN(evilRel, "?", 2)[0]))
	e.sent.reset()
	for name, bad := range map[string]string{"re-encoded": reencoded, "unkeyed": unkeyed, "signed, foreign shape": signedEvil, "another key": otherKey} {
		te := e.fails(t, "ListEmailsInFolder", in(bad), "TOOL_INPUT_INVALID")
		if !strings.Contains(te.Message, "pagination_token") {
			t.Errorf("%s: %+v", name, te)
		}
	}
	if reqs := e.sent.all(); len(reqs) != 0 {
		t.Fatalf("forged tokens reached Graph: %s", reqs[0].URL)
	}

	// Rotation.
	e.tk.tokens = sealer(newKey, oldKey)
	second := e.ok(t, "ListEmailsInFolder", in(tok))
	if ids(emails(t, second))[0] == ids(emails(t, first))[0] {
		t.Fatal("the old key's token did not continue")
	}
	newTok, _ := second["pagination_token"].(string)
	if newTok == "" {
		t.Fatal("no third page")
	}
	e.ok(t, "ListEmailsInFolder", in(newTok))
	e.tk.tokens = sealer(oldKey)
	e.fails(t, "ListEmailsInFolder", in(newTok), "TOOL_INPUT_INVALID")
}
