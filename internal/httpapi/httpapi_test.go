package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/auth"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		header, want string
		ok           bool
	}{
		{"Bearer ak_1", "ak_1", true},
		{"bearer ak_1", "ak_1", true},
		{"BEARER   ak_1  ", "ak_1", true},
		{"Basic ak_1", "", false},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"", "", false},
		{"Bearerak_1", "", false},
	}
	for _, tt := range tests {
		got, ok := BearerToken(tt.header)
		if got != tt.want || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

type oneKey string

func (k oneKey) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	if cred != string(k) {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{ID: "u1"}, nil
}

func TestAppEnvelopeLimitsAndAuth(t *testing.T) {
	app, err := New(Config{BodyLimit: 64, ReadTimeout: 1e9, WriteTimeout: 1e9, IdleTimeout: 1e9}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app.Post("/echo", func(c *fiber.Ctx) error {
		if _, err := Authenticate(c, oneKey("k")); err != nil {
			return err
		}
		return Reply(c, fiber.StatusCreated, map[string]int{"len": len(c.Body())})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	defer func() { _ = app.Shutdown() }()
	base := "http://" + ln.Addr().String()
	tests := []struct {
		name, path, auth, body string
		want                   int
		msg                    string
	}{
		{"ok", "/echo", "bearer k", "{}", 201, "created"},
		{"no credentials", "/echo", "", "{}", 401, "missing bearer"},
		{"wrong key", "/echo", "Bearer x", "{}", 401, "invalid credentials"},
		{"body over the limit", "/echo", "Bearer k", strings.Repeat("x", 65), 413, "larger than 64 bytes"},
		{"unknown route", "/nope", "", "", 404, "no route POST /nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", base+tt.path, strings.NewReader(tt.body))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var env Envelope
			if err := json.Unmarshal(b, &env); err != nil {
				t.Fatalf("not an envelope: %s", b)
			}
			if resp.StatusCode != tt.want || env.Code != tt.want || !strings.Contains(env.Msg, tt.msg) {
				t.Fatalf("got %d %s, want %d with %q", resp.StatusCode, b, tt.want, tt.msg)
			}
			// A 401 names its scheme (RFC 6750); a wrong token says so.
			want := map[string]string{"no credentials": `Bearer realm="auditrail"`, "wrong key": `Bearer realm="auditrail", error="invalid_token"`}[tt.name]
			if got := resp.Header.Get("WWW-Authenticate"); got != want {
				t.Fatalf("WWW-Authenticate %q, want %q", got, want)
			}
		})
	}
}

// A known route with another method: 405 with Allow, in the envelope.
func TestMethodNotAllowed(t *testing.T) {
	app := NewApp(nil)
	app.Get("/things/:id", func(c *fiber.Ctx) error { return Reply(c, 200, nil) })
	app.Delete("/things/:id", func(c *fiber.Ctx) error { return Reply(c, 200, nil) })
	resp, err := app.Test(httptest.NewRequest("PUT", "/things/1", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil || resp.StatusCode != 405 || env.Code != 405 ||
		!strings.Contains(env.Msg, "method PUT not allowed on /things/1") || !strings.Contains(resp.Header.Get("Allow"), "DELETE") {
		t.Fatalf("%d %s Allow=%q", resp.StatusCode, b, resp.Header.Get("Allow"))
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Fatal("zero config accepted")
	}
}
