package graphapi

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzRelative: whatever link Graph answers, what Relative accepts
// resolves under the client's base (same scheme, host and path prefix):
// the user's token never goes elsewhere.
func FuzzRelative(f *testing.F) {
	f.Add("https://graph.example/v1.0/me/messages?$skip=10")
	f.Add("https://graph.example/v1.0/me/mailFolders('Inbox')/messages?%24skip=10")
	f.Add("https://evil.example/v1.0/me/messages")
	f.Add("https://graph.example/v1.0/me/../../x")
	f.Add("https://graph.example/v1.0@evil.example/me")
	f.Fuzz(func(t *testing.T, link string) {
		c, err := New(Config{BaseURL: "https://graph.example/v1.0", Token: "t", Retry: DefaultConfig().Retry})
		if err != nil {
			t.Fatal(err)
		}
		rel, err := c.Relative(link)
		if err != nil {
			return
		}
		abs, err := c.Resolve(rel)
		if err != nil {
			t.Fatalf("Relative(%q) = %q, which does not resolve: %v", link, rel, err)
		}
		u, err := url.Parse(abs)
		if err != nil || u.Scheme != "https" || u.Host != "graph.example" || u.User != nil || !strings.HasPrefix(u.EscapedPath(), "/v1.0/") {
			t.Fatalf("Relative(%q) = %q resolves to %q", link, rel, abs)
		}
	})
}
