package graph_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/auditrail/auditrail/internal/emulators/graph"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

// BenchmarkListMessages lists 100 messages of a 2,000-message mailbox
// through the handler (no network): the default order, and a $filter.
func BenchmarkListMessages(b *testing.B) {
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: []string{"https://app.example/cb"}}},
		Users: []oauth.User{{ID: "u1", Email: "ann@contoso.com"}}, AutoApprove: true})
	if err != nil {
		b.Fatal(err)
	}
	g, err := graph.New(graph.Config{Auth: tokenless{o}})
	if err != nil {
		b.Fatal(err)
	}
	g.SeedGenerated("u1", "ann@contoso.com", 2000, 1)
	h := g.Handler()
	for _, q := range []string{"$top=100", "$top=100&$filter=" + url.QueryEscape("isRead eq false and importance eq 'high'")} {
		b.Run(q, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/me/messages?"+q, nil))
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// tokenless grants every request to u1 (the benchmark measures the
// emulator, not the OAuth emulator's token lookup).
type tokenless struct{ *oauth.Server }

func (tokenless) Authenticate(*http.Request, ...string) (oauth.Grant, int, error) {
	return oauth.Grant{UserID: "u1", Email: "ann@contoso.com", Scopes: []string{"Mail.Read"}}, 0, nil
}
