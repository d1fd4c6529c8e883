// Package httpstream serves a net/http handler on a fiber (fasthttp) route
// without buffering a response that streams.
//
// fiber's adaptor runs the handler to its end and sends what it wrote: a
// Server-Sent Events stream (the MCP streamable transport's GET, or a POST
// answered as text/event-stream) would never reach the client. Serve sends
// a response that the handler completes without flushing as one body, like
// the adaptor (the fast path: an MCP POST in JSON mode), and switches to
// fasthttp's body stream writer at the handler's first Flush: from then on
// every write reaches the client when the handler flushes it, and a client
// that goes away cancels the request's context.
package httpstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// ErrTooMuchPending is returned by the ResponseWriter's Write when the
// client does not read what the handler writes.
var ErrTooMuchPending = errors.New("httpstream: client too slow: too much unsent output")

// Options of Serve.
type Options struct {
	// Heartbeat is the interval of SSE comments (": ping") written to an
	// idle event stream, so that a client that went away is noticed.
	// Zero: 15 s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to the client. Zero: 10 s.
	WriteTimeout time.Duration
	// MaxPending bounds what the handler wrote and the client has not
	// taken. Zero: 8 MiB.
	MaxPending int
	// Log receives failures of the handler (nil: slog.Default()).
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 8 << 20
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Serve runs h for the request of c. The http.Request's context derives
// from ctx (which may carry values for h) and ends when the response is
// complete or the client has gone away.
func Serve(ctx context.Context, c *fiber.Ctx, h http.Handler, o Options) error {
	o = o.withDefaults()
	var req http.Request
	if err := fasthttpadaptor.ConvertRequest(c.Context(), &req, true); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "request: "+err.Error())
	}
	// ConvertRequest's strings (method, URL, header names and values)
	// view fasthttp's request memory, which it reuses for the connection's
	// next request once this one is answered; the handler may keep them
	// longer (the MCP SDK keeps the context of a session's initialize,
	// with its MCP-Protocol-Version, for the session's life), so copy them.
	if err := ownStrings(&req); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "request: "+err.Error())
	}
	// ConvertRequest's body is fasthttp's buffer, valid while the fiber
	// handler runs; the handler may read it after (it streams), so copy.
	req.Body = io.NopCloser(bytes.NewReader(bytes.Clone(c.Body())))
	rctx, cancel := context.WithCancel(ctx)
	w := &writer{header: http.Header{}, wake: make(chan struct{}, 1), flushed: make(chan struct{}), done: make(chan struct{}), max: o.MaxPending}
	go func() {
		defer close(w.done)
		defer func() {
			if p := recover(); p != nil {
				o.Log.Error("httpstream: handler panicked", "panic", p, "path", req.URL.Path)
				w.mu.Lock()
				if w.status == 0 {
					w.status = http.StatusInternalServerError
				}
				w.mu.Unlock()
			}
		}()
		h.ServeHTTP(w, req.WithContext(rctx))
	}()
	select {
	case <-w.done:
		// Complete without a flush: one body.
		defer cancel()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.head(c)
		c.Response().SetBodyRaw(w.pending.Bytes())
		return nil
	case <-w.flushed:
	}
	// Streaming: headers now, the body as it comes.
	w.mu.Lock()
	w.head(c)
	sse := bytes.HasPrefix([]byte(w.header.Get("Content-Type")), []byte("text/event-stream"))
	w.mu.Unlock()
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(bw *bufio.Writer) {
		defer cancel()
		w.stream(bw, conn, sse, o)
	})
	return nil
}

// ownStrings replaces the strings of r that ConvertRequest took from
// fasthttp's request memory with copies: the method, protocol, host,
// request URI (and the URL parsed from it), the header names and values
// and the transfer encodings.
func ownStrings(r *http.Request) error {
	r.Method, r.Proto, r.Host = strings.Clone(r.Method), strings.Clone(r.Proto), strings.Clone(r.Host)
	r.RequestURI = strings.Clone(r.RequestURI)
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return err
	}
	r.URL = u
	h := make(http.Header, len(r.Header))
	for k, vs := range r.Header {
		own := make([]string, len(vs))
		for i, v := range vs {
			own[i] = strings.Clone(v)
		}
		h[strings.Clone(k)] = own
	}
	r.Header = h
	for i, v := range r.TransferEncoding {
		r.TransferEncoding[i] = strings.Clone(v)
	}
	return nil
}

// writer is the http.ResponseWriter and http.Flusher given to the handler.
type writer struct {
	header  http.Header
	mu      sync.Mutex
	status  int
	pending bytes.Buffer
	gone    bool // the client went away: writes fail
	max     int
	wake    chan struct{} // cap 1: a flush happened
	flushed chan struct{} // closed at the first flush
	once    sync.Once
	done    chan struct{} // closed when the handler has returned
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = code
	}
}

func (w *writer) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.gone {
		return 0, net.ErrClosed
	}
	if w.pending.Len()+len(b) > w.max {
		return 0, ErrTooMuchPending
	}
	return w.pending.Write(b)
}

// Flush hands what was written to the client.
func (w *writer) Flush() {
	w.once.Do(func() { close(w.flushed) })
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// head sets the status and headers on the fiber response (w.mu held).
func (w *writer) head(c *fiber.Ctx) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	c.Status(w.status)
	for k, vs := range w.header {
		c.Response().Header.Del(k)
		for _, v := range vs {
			c.Response().Header.Add(k, v)
		}
	}
}

// take returns what is pending.
func (w *writer) take() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending.Len() == 0 {
		return nil
	}
	b := bytes.Clone(w.pending.Bytes())
	w.pending.Reset()
	return b
}

// stream copies the handler's output to the client until the handler ends
// or the client goes away.
func (w *writer) stream(bw *bufio.Writer, conn net.Conn, sse bool, o Options) {
	send := func(b []byte) error {
		if conn != nil {
			_ = conn.SetWriteDeadline(time.Now().Add(o.WriteTimeout))
		}
		if _, err := bw.Write(b); err != nil {
			return err
		}
		return bw.Flush()
	}
	fail := func() {
		w.mu.Lock()
		w.gone = true
		w.pending.Reset()
		w.mu.Unlock()
	}
	ping := time.NewTicker(o.Heartbeat)
	defer ping.Stop()
	for {
		var err error
		select {
		case <-w.wake:
			if b := w.take(); b != nil {
				err = send(b)
			}
		case <-w.done:
			if b := w.take(); b != nil {
				_ = send(b)
			}
			return
		case <-ping.C:
			if sse {
				// Between the handler's writes: an SSE event is written
				// whole by one Write and flushed.
				if b := w.take(); b != nil {
					err = send(b)
				}
				if err == nil {
					err = send([]byte(": ping\n\n"))
				}
			}
		}
		if err != nil {
			fail()
			return
		}
	}
}
