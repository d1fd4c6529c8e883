package provhttp

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLimitBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := map[string]int{"/small": 10, "/exact": 100, "/big": 101}[r.URL.Path]
		if r.URL.Query().Get("chunked") != "" {
			w.Header().Set("Transfer-Encoding", "chunked")
			for i := 0; i < n; i++ {
				w.Write([]byte("x"))
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Write([]byte(strings.Repeat("x", n)))
	}))
	defer srv.Close()
	c := Client(srv.Client().Transport, 5*time.Second, 100)
	for _, tc := range []struct {
		path    string
		wantErr bool
		want    int
	}{
		{"/small", false, 10}, {"/exact", false, 100}, {"/big", true, 0},
		{"/small?chunked=1", false, 10}, {"/exact?chunked=1", false, 100}, {"/big?chunked=1", true, 0},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := c.Get(srv.URL + tc.path)
			if err == nil {
				var b []byte
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && len(b) != tc.want {
					t.Fatalf("read %d bytes, want %d", len(b), tc.want)
				}
			}
			if tc.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrBodyTooLarge)) {
				t.Fatalf("err = %v, want ErrBodyTooLarge: %v", err, tc.wantErr)
			}
		})
	}
}

func TestRedirectsStayOnTheHost(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("Authorization"))
	}))
	defer other.Close()
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, srvURL+"/final", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, srvURL+"/loop", http.StatusFound)
		case "/final":
			w.Write([]byte(r.Header.Get("Authorization")))
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	c := Client(http.DefaultTransport, 5*time.Second, 0)
	get := func(path string) (string, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if _, err := get("/away"); !errors.Is(err, ErrRedirect) {
		t.Fatalf("redirect to another host: err = %v, want ErrRedirect", err)
	}
	if len(leaked) != 0 {
		t.Fatalf("the other host was called: %q", leaked)
	}
	if got, err := get("/here"); err != nil || got != "Bearer secret" {
		t.Fatalf("same-host redirect: %q, %v", got, err)
	}
	if _, err := get("/loop"); !errors.Is(err, ErrRedirect) {
		t.Fatalf("redirect loop: err = %v, want ErrRedirect", err)
	}
}
