package httpstream_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/httpstream"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

// serve mounts h at /h on a fiber app listening on loopback.
func serve(t *testing.T, h http.Handler, o httpstream.Options) string {
	t.Helper()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.All("/h", func(c *fiber.Ctx) error {
		return httpstream.Serve(context.WithValue(context.Background(), ctxKey{}, "from fiber"), c, h, o)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(5 * time.Second); <-done })
	return "http://" + ln.Addr().String() + "/h"
}

type ctxKey struct{}

// A handler that completes without flushing is answered with its status,
// headers and body, and sees the request (method, headers, body) and the
// context values given to Serve.
func TestWholeResponse(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"method":%q,"body":%q,"h":%q,"ctx":%q,"q":%q}`, r.Method, b, r.Header.Get("X-A"), r.Context().Value(ctxKey{}), r.URL.Query().Get("q"))
	}), httpstream.Options{})
	req, _ := http.NewRequest("POST", url+"?q=1", strings.NewReader("hello"))
	req.Header.Set("X-A", "b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 202 || resp.Header.Get("Mcp-Session-Id") != "s1" || resp.Header.Get("Content-Type") != "application/json" ||
		string(body) != `{"method":"POST","body":"hello","h":"b","ctx":"from fiber","q":"1"}` {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
}

// An event stream reaches the client event by event while the handler
// runs; an idle stream gets heartbeats; a client that goes away cancels
// the handler's context.
func TestStreamReachesClientAndEndsWithIt(t *testing.T) {
	ended := make(chan error, 1)
	next := make(chan struct{})
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-next
		fmt.Fprint(w, "data: two\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		ended <- r.Context().Err()
	}), httpstream.Options{Heartbeat: 50 * time.Millisecond})
	// A buffered response would never come: the client gives up.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	rd := bufio.NewReader(resp.Body)
	line := func() string {
		s, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if l := line(); l != "data: one\n" {
		t.Fatalf("first line %q", l)
	}
	close(next)
	var got []string
	for len(got) < 3 {
		if l := strings.TrimSpace(line()); l != "" {
			got = append(got, l)
		}
	}
	if got[0] != "data: two" || got[1] != ": ping" || got[2] != ": ping" {
		t.Fatalf("then %q", got)
	}
	resp.Body.Close()
	select {
	case err := <-ended:
		if err != context.Canceled {
			t.Fatalf("handler context: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not see the client go away")
	}
}

// A panic in the handler is a 500, not a crash.
func TestPanicIs500(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), httpstream.Options{})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// A handler that writes more than MaxPending before the client takes it
// gets an error instead of growing the buffer.
func TestPendingBounded(t *testing.T) {
	werr := make(chan error, 1)
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := w.Write(make([]byte, 2000))
		werr <- err
	}), httpstream.Options{MaxPending: 1000})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-werr; err != httpstream.ErrTooMuchPending {
		t.Fatalf("write: %v", err)
	}
}

// The request a handler gets owns its strings: a handler may keep them
// after the response (the MCP SDK keeps a session's initialize context),
// while fasthttp reuses a request's memory for the next request on the
// same connection.
func TestRequestOutlivesItsResponse(t *testing.T) {
	type seen struct{ method, path, query, host, header string }
	var mu sync.Mutex
	var kept []*http.Request
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		kept = append(kept, r)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}), httpstream.Options{})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	send := func(method, q, v string) {
		req, _ := http.NewRequest(method, url+"?q="+q, nil)
		req.Header.Set("X-A", v)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The second on the first's connection, its values of the same lengths.
	send("PUT", "one1", "aaaa")
	send("GET", "two2", "bbbb")
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != 2 {
		t.Fatalf("%d requests served", len(kept))
	}
	r := kept[0]
	got := seen{r.Method, r.URL.Path, r.URL.Query().Get("q"), r.Host, r.Header.Get("X-A")}
	if want := (seen{"PUT", "/h", "one1", r.Host, "aaaa"}); got != want || !strings.HasPrefix(r.RequestURI, "/h?q=one1") {
		t.Fatalf("the first request, once the second was served: %+v %q, want %+v", got, r.RequestURI, want)
	}
}
