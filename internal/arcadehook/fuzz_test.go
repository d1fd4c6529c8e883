package arcadehook

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Whatever a client sends, the server answers 400 (with an ErrorResponse)
// or an answer valid for the description; it never fails or panics.
func FuzzServer(f *testing.F) {
	for _, s := range []string{catalog, preReq, postReq, `{}`, `null`, `{"user_id":"u","toolkits":{"A":{}}}`,
		`{"user_id":"u","toolkits":{"A":{"tools":{"B":[{}]}}}}`, `{"execution_id":"e","tool":{"name":"B","toolkit":"A","version":"1"},"inputs":null,"context":{}}`} {
		for _, path := range []string{"/access", "/pre", "/post"} {
			f.Add(path, []byte(s))
		}
	}
	c, err := LoadContract(description)
	if err != nil {
		f.Fatal(err)
	}
	rec := &Recorder{}
	s, err := New(Config{Token: token, Middlewares: []MiddlewareFunc{rec.Middleware}, Policy: Policy{
		Only: nil, Hide: []string{"A", "Gmail.Send@2.0.0", "Docs.Create"}, HideDestructive: true,
		Inputs: map[string]map[string]any{"A.B": {"x": 1}}, Secrets: map[string][]map[string]string{"A.B": {{"K": "v"}}},
		Output: map[string]any{"Gmail.Send": []any{"x"}},
	}}, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		if path != "/access" && path != "/pre" && path != "/post" {
			return
		}
		rec.Reset()
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 && w.Code != 400 {
			t.Fatalf("%s %q: %d %s", path, body, w.Code, w.Body)
		}
		exs := rec.Exchanges()
		if len(exs) != 1 {
			t.Fatalf("%d exchanges", len(exs))
		}
		if w.Code == 200 {
			if err := c.ValidateResponse(exs[0]); err != nil {
				t.Fatalf("%s %q: %v", path, body, err)
			}
		}
	})
}
