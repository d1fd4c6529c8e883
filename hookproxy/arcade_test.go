package hookproxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// recorder is a hook server that keeps the body of the last request per
// path and answers OK.
type recorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies map[string]any
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{bodies: map[string]any{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("%s: request is not JSON: %v", req.URL.Path, err)
		}
		r.mu.Lock()
		r.bodies[req.URL.Path] = v
		r.mu.Unlock()
		if req.URL.Path == "/access" {
			_, _ = io.WriteString(w, `{}`)
			return
		}
		_, _ = io.WriteString(w, `{"code":"OK"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) body(path string) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[path]
}

func allPoints(endpoint string, c Contract) Hook {
	pc := func(path string) PointConfig {
		return PointConfig{Path: path, Timeout: time.Second, FailureMode: FailClosed}
	}
	return Hook{ID: "h-" + string(c), Name: "h", Revision: "1", Endpoint: endpoint, Contract: c, MaxAttempts: 1, ConsecutiveFailures: 5,
		OpenFor: time.Minute, Points: map[Point]PointConfig{Access: pc("/access"), Pre: pc("/pre"), Post: pc("/post")}}
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// The requests of each contract, as the server receives them: the arcade
// contract changes context.secrets, context.authorization and
// requirements.secrets, nothing else; requirements.authorization carries
// oauth2.scopes beside scopes in both.
func TestRequestShapesByContract(t *testing.T) {
	scopes := []string{"docs.read", "drive.file"}
	ptype, connected, gid := "oauth2", true, "google"
	user := "alice"
	meta := map[string]any{"organization_id": "o", "project_id": "p"}
	secrets := map[string]bool{"API_KEY": true, "DB_URL": true}
	auth := map[string]hooksapi.AuthorizationInfo{
		"microsoft": {ProviderType: &ptype, Connected: new(bool)},
		"google":    {ProviderType: &ptype, Connected: &connected, Scopes: &scopes},
	}
	hctx := hooksapi.Context{UserId: &user, Metadata: &meta, Secrets: &secrets, Authorization: &auth}
	tool := hooksapi.Tool{Name: "CreateBlankDocument", Toolkit: "DocsToolkit", Version: "6.0.0"}
	reqSecrets := []string{"API_KEY"}
	catalog := map[string]hooksapi.ToolkitInfo{"DocsToolkit": {Tools: map[string][]hooksapi.VersionInfo{
		"CreateBlankDocument": {{Version: "6.0.0", Requirements: hooksapi.Requirements{
			Authorization: &[]hooksapi.AuthorizationRequirement{{ProviderType: "oauth2", ProviderId: &gid, Scopes: &scopes,
				Oauth2: &hooksapi.OAuth2Scopes{Scopes: &scopes}}},
			Secrets: &reqSecrets}}},
	}}}
	errMsg := "boom"

	tests := []struct {
		contract Contract
		access   string
		pre      string
		post     string
	}{
		{ContractAuditrail,
			`{"user_id":"alice","toolkits":{"DocsToolkit":{"tools":{"CreateBlankDocument":[{"version":"6.0.0","requirements":{
				"authorization":[{"provider_type":"oauth2","provider_id":"google","scopes":["docs.read","drive.file"],"oauth2":{"scopes":["docs.read","drive.file"]}}],
				"secrets":["API_KEY"]}}]}}}}`,
			`{"execution_id":"e1","tool":{"name":"CreateBlankDocument","toolkit":"DocsToolkit","version":"6.0.0"},"inputs":{"title":"x"},
			  "context":{"user_id":"alice","metadata":{"organization_id":"o","project_id":"p"},"secrets":{"API_KEY":true,"DB_URL":true},
			    "authorization":{"google":{"provider_type":"oauth2","connected":true,"scopes":["docs.read","drive.file"]},
			                     "microsoft":{"provider_type":"oauth2","connected":false}}}}`,
			`{"execution_id":"e1","tool":{"name":"CreateBlankDocument","toolkit":"DocsToolkit","version":"6.0.0"},"inputs":{"title":"x"},
			  "success":false,"execution_code":"TOOL_RUNTIME_ERROR","execution_error":"boom",
			  "context":{"user_id":"alice","metadata":{"organization_id":"o","project_id":"p"},"secrets":{"API_KEY":true,"DB_URL":true},
			    "authorization":{"google":{"provider_type":"oauth2","connected":true,"scopes":["docs.read","drive.file"]},
			                     "microsoft":{"provider_type":"oauth2","connected":false}}}}`},
		{ContractArcade,
			`{"user_id":"alice","toolkits":{"DocsToolkit":{"tools":{"CreateBlankDocument":[{"version":"6.0.0","requirements":{
				"authorization":[{"provider_type":"oauth2","provider_id":"google","scopes":["docs.read","drive.file"],"oauth2":{"scopes":["docs.read","drive.file"]}}],
				"secrets":[{"name":"API_KEY"}]}}]}}}}`,
			`{"execution_id":"e1","tool":{"name":"CreateBlankDocument","toolkit":"DocsToolkit","version":"6.0.0"},"inputs":{"title":"x"},
			  "context":{"user_id":"alice","metadata":{"organization_id":"o","project_id":"p"},"secrets":["API_KEY","DB_URL"],
			    "authorization":[{"provider_id":"google","oauth2":{"scopes":["docs.read","drive.file"]}},
			                     {"provider_id":"microsoft","oauth2":{"scopes":[]}}]}}`,
			`{"execution_id":"e1","tool":{"name":"CreateBlankDocument","toolkit":"DocsToolkit","version":"6.0.0"},"inputs":{"title":"x"},
			  "success":false,"execution_code":"TOOL_RUNTIME_ERROR","execution_error":"boom",
			  "context":{"user_id":"alice","metadata":{"organization_id":"o","project_id":"p"},"secrets":["API_KEY","DB_URL"],
			    "authorization":[{"provider_id":"google","oauth2":{"scopes":["docs.read","drive.file"]}},
			                     {"provider_id":"microsoft","oauth2":{"scopes":[]}}]}}`},
	}
	for _, tc := range tests {
		t.Run(string(tc.contract), func(t *testing.T) {
			rec := newRecorder(t)
			p := New(testConfig(), nil)
			defer p.Close()
			hooks := []Hook{allPoints(rec.srv.URL, tc.contract)}
			if d := p.Access(context.Background(), hooks, user, catalog); !d.Visible["DocsToolkit"]["CreateBlankDocument"] {
				t.Fatalf("access: %+v", d)
			}
			if r := p.Pre(context.Background(), hooks, hooksapi.PreRequest{ExecutionId: "e1", Tool: tool, Inputs: map[string]any{"title": "x"}, Context: hctx}); !r.Allowed {
				t.Fatalf("pre: %+v", r)
			}
			if r := p.Post(context.Background(), hooks, hooksapi.PostRequest{ExecutionId: "e1", Tool: tool, Inputs: map[string]any{"title": "x"},
				ExecutionCode: "TOOL_RUNTIME_ERROR", ExecutionError: &errMsg, Context: hctx}); !r.Allowed {
				t.Fatalf("post: %+v", r)
			}
			for path, want := range map[string]string{"/access": tc.access, "/pre": tc.pre, "/post": tc.post} {
				if got := rec.body(path); !reflect.DeepEqual(got, jsonValue(t, want)) {
					g, _ := json.Marshal(got)
					t.Errorf("%s: got\n%s\nwant\n%s", path, g, want)
				}
			}
		})
	}
}

// An arcade request never sends null inputs (the schema wants an object);
// an unknown contract is a configuration failure, its failure mode applied.
func TestArcadeEdges(t *testing.T) {
	rec := newRecorder(t)
	p := New(testConfig(), nil)
	defer p.Close()
	h := allPoints(rec.srv.URL, ContractArcade)
	if r := p.Pre(context.Background(), []Hook{h}, hooksapi.PreRequest{ExecutionId: "e", Tool: hooksapi.Tool{Name: "T", Toolkit: "K", Version: "1"}}); !r.Allowed {
		t.Fatalf("pre: %+v", r)
	}
	want := jsonValue(t, `{"execution_id":"e","tool":{"name":"T","toolkit":"K","version":"1"},"inputs":{},"context":{}}`)
	if got := rec.body("/pre"); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	bad := allPoints(rec.srv.URL, "soap")
	bad.ID = "bad"
	r := p.Pre(context.Background(), []Hook{bad}, preReq())
	if r.Allowed || r.Calls[0].Failure != FailureConfig {
		t.Fatalf("unknown contract: %+v", r)
	}
}
