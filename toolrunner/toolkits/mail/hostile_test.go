package mail

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/internal/provhttp/provhttptest"
	"github.com/auditrail/auditrail/toolrunner"
)

// hostileGraph is a Graph API base a tenant chose: it answers every GET
// with answer, or streams size bytes, or redirects.
type hostileGraph struct {
	srv      *httptest.Server
	mu       sync.Mutex
	answer   string
	size     int64
	declared bool
	redirect string
}

func newHostileGraph(t *testing.T) *hostileGraph {
	h := &hostileGraph{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		answer, size, declared, redirect := h.answer, h.size, h.declared, h.redirect
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case redirect != "":
			http.Redirect(w, r, redirect+r.URL.Path, http.StatusTemporaryRedirect)
		case size > 0:
			provhttptest.WriteHuge(w, `{"value":[],"x":"`, `"}`, size, declared)
		default:
			io.WriteString(w, answer)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostileGraph) set(f func(h *hostileGraph)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer, h.size, h.declared, h.redirect = "", 0, false, ""
	f(h)
}

// TestHostileGraphAnswers: a tenant's api_base_url answering numbers no
// mailbox has, or more bytes than the cap, costs the call (an upstream
// tool error, not worth retrying) and never the process.
func TestHostileGraphAnswers(t *testing.T) {
	e := newEnv(t)
	h := newHostileGraph(t)
	e.setBase("u1", h.srv.URL+"/v1.0")
	type call struct {
		tool string
		in   map[string]any
	}
	list := call{"ListEmails", nil}
	attachments := call{"ListEmailAttachments", map[string]any{"message_id": "m1"}}
	folders := call{"ListMailFolders", nil}
	get := call{"GetEmail", map[string]any{"message_id": "m1"}}
	tests := []struct {
		name  string
		set   func(h *hostileGraph)
		calls []call
	}{
		{"huge @odata.count", func(h *hostileGraph) { h.answer = `{"@odata.count":68719476736,"value":[{"id":"a"}]}` }, []call{list, attachments, folders}},
		{"count below the items", func(h *hostileGraph) { h.answer = `{"@odata.count":-500,"value":[{"id":"a"}]}` }, []call{list, folders}},
		{"count beyond int64", func(h *hostileGraph) { h.answer = `{"@odata.count":1e300,"value":[]}` }, []call{list}},
		{"negative attachment size", func(h *hostileGraph) { h.answer = `{"value":[{"id":"a","name":"x","size":-500}]}` }, []call{attachments}},
		{"negative folder counts", func(h *hostileGraph) {
			h.answer = `{"value":[{"id":"f","displayName":"x","totalItemCount":-500,"unreadItemCount":68719476736}]}`
		}, []call{folders}},
		// Streamed past the cap: the toolkit's transport is capped at 4 MiB
		// for this case (reading the default 64 MiB takes tens of seconds
		// under -race); the default is TestMailMaxResponseBytes', and a
		// declared length past it fails at once.
		{"100 MiB body", func(h *hostileGraph) { h.size = 100 << 20 }, []call{list}},
		{"100 MiB body declared", func(h *hostileGraph) { h.size, h.declared = 100<<20, true }, []call{list, get, folders}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.set(tc.set)
			if tc.name == "100 MiB body" {
				limited, max := e.tk.limited, e.tk.cfg.MaxResponseBytes
				e.tk.limited, e.tk.cfg.MaxResponseBytes = provhttp.LimitBody(e.tk.base, 4<<20), 4<<20
				defer func() { e.tk.limited, e.tk.cfg.MaxResponseBytes = limited, max }()
			}
			for _, c := range tc.calls {
				if te := e.fails(t, c.tool, c.in, toolrunner.KindUpstream); te.CanRetry && !strings.Contains(tc.name, "beyond") {
					t.Errorf("%s: %+v", c.tool, te)
				}
			}
		})
	}
}

// TestGraphRedirectKeepsTheToken: a Graph API base that redirects to
// another host gets no request there, let alone the bearer token.
func TestGraphRedirectKeepsTheToken(t *testing.T) {
	e := newEnv(t)
	h := newHostileGraph(t)
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, `{"value":[]}`)
	}))
	defer other.Close()
	e.setBase("u1", h.srv.URL+"/v1.0")
	h.set(func(h *hostileGraph) { h.redirect = other.URL })
	for _, tool := range []string{"ListEmails", "WhoAmI", "ListMailFolders"} {
		e.fails(t, tool, nil, toolrunner.KindUpstream)
	}
	e.fails(t, "GetEmail", map[string]any{"message_id": "m1"}, toolrunner.KindUpstream)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("the other host was called: %q", seen)
	}
}

// TestMailMaxResponseBytes: the cap is a validated config field.
func TestMailMaxResponseBytes(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.MaxResponseBytes != 64<<20 {
		t.Errorf("default %d", cfg.MaxResponseBytes)
	}
	cfg.MaxResponseBytes = 10
	if _, err := New(cfg); err == nil {
		t.Error("MaxResponseBytes 10 accepted")
	}
}
