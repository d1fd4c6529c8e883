// Package openapitest gives tests the embedded OpenAPI descriptions
// (schemas/openapi), each validated and routed for a server at a base URL,
// so that requests and answers can be checked against them.
package openapitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/auditrail/auditrail/schemas"
)

var decoders sync.Once

// Router loads schemas/openapi/<file> (audit.yaml, admin.yaml, tools.yaml,
// hooks.yaml), fails the test unless it is valid OpenAPI, and routes it
// for a server at base. The non-JSON answers of the APIs (HTML pages, CSV
// and JSON Lines exports, the Server-Sent Events of the live streams) are
// decoded as plain text.
func Router(t testing.TB, file, base string) routers.Router {
	t.Helper()
	decoders.Do(func() {
		for _, ct := range []string{"text/html", "text/csv", "application/x-ndjson", "text/event-stream"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
		}
	})
	b, err := schemas.OpenAPI.ReadFile("openapi/" + file)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not valid OpenAPI: %v", file, err)
	}
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return router
}

// CheckResponse fails the test unless req is a route of router and the
// answer (status, header, body) matches its description; it answers the
// route's operation id.
func CheckResponse(t testing.TB, router routers.Router, req *http.Request, status int, header http.Header, body []byte) string {
	t.Helper()
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s is not described: %v", req.URL, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Fatalf("%s: the answer does not match the description: %v\n%s", req.URL, err, body)
	}
	return route.Operation.OperationID
}

// CheckRequest fails the test unless req matches its route's description.
func CheckRequest(t testing.TB, router routers.Router, req *http.Request) {
	t.Helper()
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s is not described: %v", req.URL, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		t.Fatalf("%s: the request does not match the description: %v", req.URL, err)
	}
}
