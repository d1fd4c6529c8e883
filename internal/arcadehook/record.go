package arcadehook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Exchange is one request a server received and its answer, as sent.
type Exchange struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	Status       int
	RespHeader   http.Header
	RespBody     []byte
}

// Recorder keeps the exchanges of a handler; safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	exs []Exchange
}

// Middleware records every exchange that passes through it: in
// Config.Middlewares, every request of the server's routes as it arrived
// (refused ones included) and the answer as written.
func (rec *Recorder) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
		r.Body = io.NopCloser(bytes.NewReader(body))
		cw := httptest.NewRecorder()
		next.ServeHTTP(cw, r)
		for k, v := range cw.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(cw.Code)
		_, _ = w.Write(cw.Body.Bytes())
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.exs = append(rec.exs, Exchange{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body,
			Status: cw.Code, RespHeader: cw.Header().Clone(), RespBody: cw.Body.Bytes()})
	})
}

// Wrap records the exchanges of any handler (one whose routes are not the
// generated ones, or to see what was refused before validation).
func (rec *Recorder) Wrap(h http.Handler) http.Handler { return rec.Middleware(h) }

// Exchanges returns what was recorded so far.
func (rec *Recorder) Exchanges() []Exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Exchange(nil), rec.exs...)
}

// Reset forgets the recorded exchanges.
func (rec *Recorder) Reset() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.exs = nil
}

// Contract validates exchanges against an OpenAPI description with
// kin-openapi.
type Contract struct {
	Doc    *openapi3.T
	router routers.Router
}

// LoadContract loads and validates a description from a file.
func LoadContract(path string) (*Contract, error) {
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("arcadehook: load %s: %w", path, err)
	}
	return NewContract(doc)
}

// NewContract validates doc and routes requests by its paths, on any host.
func NewContract(doc *openapi3.T) (*Contract, error) {
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("arcadehook: description: %w", err)
	}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("arcadehook: router: %w", err)
	}
	return &Contract{Doc: doc, router: router}, nil
}

// ValidateRequest checks a request of ex against the description: its
// operation, the bearer header where the operation requires it, the body.
func (c *Contract) ValidateRequest(ex Exchange) (*openapi3filter.RequestValidationInput, error) {
	req, err := http.NewRequest(ex.Method, "http://hook"+ex.Path, bytes.NewReader(ex.Body))
	if err != nil {
		return nil, err
	}
	req.Header = ex.Header.Clone()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", ex.Method, ex.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: bearerPresent}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return in, fmt.Errorf("%s %s: %w", ex.Method, ex.Path, err)
	}
	return in, nil
}

// ValidateResponse checks the answer of ex (its request must be valid).
func (c *Contract) ValidateResponse(ex Exchange) error {
	in, err := c.ValidateRequest(ex)
	if err != nil {
		return err
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: ex.Status, Header: ex.RespHeader,
		Options: &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true}}
	out.SetBodyBytes(ex.RespBody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s answer %d: %w", ex.Method, ex.Path, ex.Status, err)
	}
	return nil
}

// bearerPresent is the check of the bearerAuth scheme: an Authorization
// header "Bearer <something>".
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme == nil || in.SecurityScheme.Type != "http" || in.SecurityScheme.Scheme != "bearer" {
		return fmt.Errorf("security scheme %s not checked", in.SecuritySchemeName)
	}
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	if len(h) <= len("Bearer ") || h[:len("Bearer ")] != "Bearer " {
		return fmt.Errorf("no bearer token")
	}
	return nil
}
