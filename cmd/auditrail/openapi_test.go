//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/auditrail/auditrail/schemas/openapitest"
)

// apiClient calls a running auditrail and validates every response of a
// documented route against schemas/openapi.
type apiClient struct {
	t       *testing.T
	base    string
	routers []routers.Router
	checked int
}

func newAPIClient(t *testing.T, base string) *apiClient {
	t.Helper()
	c := &apiClient{t: t, base: base}
	for _, name := range []string{"audit.yaml", "admin.yaml", "tools.yaml"} {
		c.routers = append(c.routers, openapitest.Router(t, name, "http://"+base))
	}
	return c
}

type apiResp struct {
	status int
	body   map[string]any
	header http.Header
	raw    []byte
}

func (r apiResp) data() map[string]any {
	d, _ := r.body["data"].(map[string]any)
	return d
}

func (r apiResp) msg() string { s, _ := r.body["msg"].(string); return s }

// call sends a request; body is JSON-encoded unless it is a string (sent as is).
func (c *apiClient) call(method, path, key string, body any, hdr ...string) apiResp {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, "http://"+c.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := apiResp{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		c.t.Fatalf("%s %s: %d, body is not JSON: %s", method, path, resp.StatusCode, raw)
	}
	if code, _ := out.body["code"].(float64); int(code) != resp.StatusCode {
		c.t.Fatalf("%s %s: envelope code %v != status %d", method, path, out.body["code"], resp.StatusCode)
	}
	if resp.StatusCode >= 400 {
		if _, ok := out.body["data"]; ok {
			c.t.Fatalf("%s %s: error carries data: %s", method, path, raw)
		}
	}
	if resp.StatusCode >= 500 && resp.StatusCode != 503 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	c.validate(req, resp, raw)
	return out
}

func (c *apiClient) validate(req *http.Request, resp *http.Response, raw []byte) {
	c.t.Helper()
	for _, r := range c.routers {
		route, params, err := r.FindRoute(req)
		if err != nil {
			continue
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 resp.StatusCode,
			Header:                 resp.Header,
			Body:                   io.NopCloser(bytes.NewReader(raw)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			c.t.Fatalf("%s %s: response does not match the OpenAPI description: %v\n%s", req.Method, req.URL.Path, err, raw)
		}
		c.checked++
		return
	}
}
