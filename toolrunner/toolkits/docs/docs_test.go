package docs

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

func TestDefinitions(t *testing.T) {
	tk, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		params     string // name:type:required[=default], comma-separated
		out        string
		ops        string
		ro, de, id bool
		scopes     []string
	}
	file := []string{ScopeDriveFile}
	search := "document_contains:array<string>:false,document_not_contains:array<string>:false,search_only_in_shared_drive_id:string:false," +
		"include_shared_drives:boolean:false=false,include_organization_domain_documents:boolean:false=false,order_by:array<string>:false=[modifiedTime desc]," +
		"limit:integer:false=%d,pagination_token:string:false"
	tests := map[string]want{
		"CommentOnDocument":           {"document_id:string:true,comment_text:string:true", "json", "create", false, false, false, file},
		"CreateBlankDocument":         {"title:string:true", "json", "create", false, false, false, file},
		"CreateDocumentFromText":      {"title:string:true,text_content:string:true,input_format:string:false=markdown", "json", "create", false, false, false, file},
		"EditDocument":                {"document_id:string:true,requests:array<json>:false,revision_id:string:false", "json", "read,update", false, true, false, file},
		"GenerateGoogleFilePickerUrl": {"", "json", "read", true, false, true, file},
		"GetDocumentAsDocmd":          {"document_id:string:true,tab_id:string:false", "string", "read", true, false, true, file},
		"GetDocumentById":             {"document_id:string:true", "json", "read", true, false, true, file},
		"GetDocumentMetadata":         {"document_id:string:true", "json", "read", true, false, true, file},
		"InsertTextAtEndOfDocument":   {"document_id:string:true,text_content:string:true", "json", "update", false, false, false, file},
		"ListDocumentComments":        {"document_id:string:true,include_deleted:boolean:false=false", "json", "read", true, false, true, file},
		"SearchAndRetrieveDocuments":  {"return_format:string:false=markdown," + strings.Replace(search, "%d", "10", 1), "json", "read", true, false, true, file},
		"SearchDocuments":             {strings.Replace(search, "%d", "50", 1), "json", "read", true, false, true, file},
		"WhoAmI":                      {"", "json", "read", true, false, true, []string{ScopeOpenID, ScopeEmail, ScopeProfile, ScopeDriveFile}},
	}
	tools := tk.Tools()
	if len(tools) != 13 {
		t.Fatalf("%d tools, want 13", len(tools))
	}
	reg := toolrunner.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatalf("register: %v", err)
	}
	for _, tool := range tools {
		d := tool.Definition()
		w, ok := tests[d.Name]
		if !ok {
			t.Errorf("unexpected tool %s", d.Name)
			continue
		}
		var ps []string
		for _, p := range d.Parameters {
			s := p.Name + ":" + p.Type + ":" + map[bool]string{true: "true", false: "false"}[p.Required]
			if p.Default != nil {
				b, _ := json.Marshal(p.Default)
				s += "=" + strings.ReplaceAll(string(b), `"`, "")
			}
			ps = append(ps, s)
		}
		if got := strings.Join(ps, ","); got != w.params {
			t.Errorf("%s params\n got %s\nwant %s", d.Name, got, w.params)
		}
		b := d.Metadata.Behavior
		if d.Toolkit != "DocsToolkit" || d.Version != "6.0.0" || d.Output.Type != w.out || strings.Join(b.Operations, ",") != w.ops ||
			b.ReadOnly != w.ro || b.Destructive != w.de || b.Idempotent != w.id || !b.OpenWorld ||
			!slices.Equal(d.Metadata.Classification.ServiceDomains, []string{"DOCUMENTS"}) {
			t.Errorf("%s: %+v output %s", d.Name, d.Metadata, d.Output.Type)
		}
		if a := d.Requirements.Authorization; len(a) != 1 || a[0].ProviderID != "google" || a[0].ProviderType != "google" || !slices.Equal(a[0].Scopes, w.scopes) {
			t.Errorf("%s authorization %+v", d.Name, a)
		}
		if d.Deprecated != (d.Name == "GetDocumentById") {
			t.Errorf("%s deprecated=%v", d.Name, d.Deprecated)
		}
		wantSecrets := []toolrunner.SecretRequirement{}
		if d.Name == "EditDocument" {
			wantSecrets = []toolrunner.SecretRequirement{{Name: "LLM_API_KEY", Type: "password", Optional: true}}
			if !strings.Contains(d.Description, "LLM_API_KEY") {
				t.Error("EditDocument's description does not say what LLM_API_KEY is for")
			}
		}
		if !slices.Equal(d.Requirements.Secrets, wantSecrets) {
			t.Errorf("%s secrets %+v", d.Name, d.Requirements.Secrets)
		}
		delete(tests, d.Name)
	}
	if len(tests) > 0 {
		t.Errorf("missing tools: %v", tests)
	}
	// Enums and bounds.
	for _, p := range defSearchAndRetrieveDocuments().Parameters {
		switch p.Name {
		case "return_format":
			if !slices.Equal(p.Enum, []string{"docmd", "markdown", "html", "provider_api_json"}) {
				t.Errorf("return_format enum %v", p.Enum)
			}
		case "order_by":
			if len(p.Enum) != 22 || !slices.Contains(p.Enum, "name_natural desc") {
				t.Errorf("order_by enum %v", p.Enum)
			}
		case "limit":
			if *p.Minimum != 1 || *p.Maximum != RetrieveMaxLimit {
				t.Errorf("limit bounds %d..%d", *p.Minimum, *p.Maximum)
			}
		}
	}
	for _, p := range defCreateDocumentFromText().Parameters {
		if p.Name == "input_format" && !slices.Equal(p.Enum, []string{"markdown", "plain"}) {
			t.Errorf("input_format enum %v", p.Enum)
		}
	}
	// The seed's upper-case spellings are accepted.
	if _, err := toolrunner.Validate(defCreateDocumentFromText(), map[string]any{"title": "x", "text_content": "y", "input_format": "PLAIN"}); err != nil {
		t.Errorf("PLAIN refused: %v", err)
	}
	if _, err := toolrunner.Validate(defSearchDocuments(), map[string]any{"limit": float64(SearchMaxLimit + 1)}); err == nil {
		t.Error("limit above the maximum accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 0
	if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("zero timeout: %v", err)
	}
}

// docmdOf answers the DocMD of a document through the tool.
func (e *env) docmdOf(t *testing.T, id string) string {
	t.Helper()
	s, ok := e.ok(t, "GetDocumentAsDocmd", map[string]any{"document_id": id}).(string)
	if !ok {
		t.Fatal("GetDocumentAsDocmd answered no string")
	}
	if _, err := docmd.Parse(s); err != nil {
		t.Fatalf("DocMD does not parse: %v\n%s", err, s)
	}
	return s
}

func TestCreateReadInsert(t *testing.T) {
	e := newEnv(t)
	blank := obj(t, e.ok(t, "CreateBlankDocument", map[string]any{"title": "Blank"}))
	id, _ := blank["documentId"].(string)
	if id == "" || blank["title"] != "Blank" || blank["documentUrl"] != "https://docs.google.com/document/d/"+id+"/edit" {
		t.Fatalf("created %v", blank)
	}
	plain := obj(t, e.ok(t, "CreateDocumentFromText", map[string]any{"title": "Plain", "text_content": "# not a heading\n*as is*", "input_format": "PLAIN"}))
	pid := plain["documentId"].(string)
	md := e.docmdOf(t, pid)
	if !strings.Contains(md, "# not a heading") || !strings.Contains(md, "*as is*") || strings.Contains(md, "HEADING_1") {
		t.Errorf("plain text not inserted as is:\n%s", md)
	}

	// InsertTextAtEndOfDocument appends to the first tab's body and
	// answers the batchUpdate response.
	resp := obj(t, e.ok(t, "InsertTextAtEndOfDocument", map[string]any{"document_id": pid, "text_content": "\nTHE END"}))
	if resp["documentId"] != pid || resp["replies"] == nil {
		t.Errorf("insert response %v", resp)
	}
	md = e.docmdOf(t, pid)
	if !strings.Contains(md, "THE END") || strings.Index(md, "THE END") < strings.Index(md, "*as is*") {
		t.Errorf("text not at the end:\n%s", md)
	}

	meta := obj(t, e.ok(t, "GetDocumentMetadata", map[string]any{"document_id": pid}))
	text := "# not a heading\n*as is*\nTHE END\n"
	tabs, _ := meta["tabs"].([]map[string]any)
	if meta["title"] != "Plain" || meta["document_id"] != pid || meta["total_characters"] != int64(len(text)) || len(tabs) != 1 ||
		tabs[0]["character_count"] != int64(len(text)) || tabs[0]["tab_id"] == "" || tabs[0]["end_index"] != int64(len(text)+1) {
		t.Errorf("metadata %v", meta)
	}

	raw := obj(t, e.ok(t, "GetDocumentById", map[string]any{"document_id": id}))
	if raw["documentId"] != id || raw["title"] != "Blank" || raw["tabs"] == nil {
		t.Errorf("raw document %v", raw)
	}
	if e := e.fails(t, "GetDocumentAsDocmd", map[string]any{"document_id": pid, "tab_id": "t.nope"}, toolrunner.KindNotFound); !strings.Contains(e.Message, "GetDocumentMetadata") {
		t.Errorf("unknown tab: %v", e)
	}
}

// TestNotFoundSuggestsPicker: a document the user cannot see (another
// user's, or none) answers NOT_FOUND naming the picker (seeds/002 Errors
// rule 1), for every tool that takes a document.
func TestNotFoundSuggestsPicker(t *testing.T) {
	e := newEnv(t)
	other := obj(t, e.ok(t, "CreateBlankDocument", map[string]any{"title": "Ann's"}))["documentId"].(string)
	for _, id := range []string{other, "1doesnotexist"} {
		for _, tc := range []struct {
			tool string
			in   map[string]any
		}{
			{"GetDocumentAsDocmd", nil},
			{"GetDocumentById", nil},
			{"GetDocumentMetadata", nil},
			{"InsertTextAtEndOfDocument", map[string]any{"text_content": "x"}},
			{"EditDocument", map[string]any{"requests": []any{map[string]any{"insertText": map[string]any{"text": "x", "location": map[string]any{"index": 1.0}}}}}},
			{"EditDocument", nil},
		} {
			in := map[string]any{"document_id": id}
			for k, v := range tc.in {
				in[k] = v
			}
			res := e.runAs(t, "u2", tc.tool, in)
			if res.Success || res.Error.Kind != toolrunner.KindNotFound || res.Error.CanRetry ||
				!strings.Contains(res.Error.Message, "GenerateGoogleFilePickerUrl") || !strings.Contains(res.Error.Message, id) {
				t.Errorf("%s %s as u2: %+v", tc.tool, id, res.Error)
			}
		}
	}
}

func TestAuthorizationRequired(t *testing.T) {
	e := newEnv(t)
	res := e.runAs(t, "nobody", "GetDocumentAsDocmd", map[string]any{"document_id": "1x"})
	if res.Success || res.Error.Kind != toolrunner.KindAuthorization || res.Authorization == nil ||
		res.Authorization.Provider != "google" || !slices.Equal(res.Authorization.Scopes, []string{ScopeDriveFile}) {
		t.Fatalf("%+v %+v", res.Error, res.Authorization)
	}
	res = e.runAs(t, "nobody", "WhoAmI", nil)
	if res.Success || res.Error.Kind != toolrunner.KindAuthorization || !slices.Equal(res.Authorization.Scopes, []string{ScopeOpenID, ScopeEmail, ScopeProfile, ScopeDriveFile}) {
		t.Fatalf("WhoAmI: %+v %+v", res.Error, res.Authorization)
	}
}

func TestPickerURL(t *testing.T) {
	e := newEnv(t)
	out := obj(t, e.ok(t, "GenerateGoogleFilePickerUrl", nil))
	if out["url"] != "https://platform.example/picker/abc" || out["expires_at"] == nil || !strings.Contains(out["instructions"].(string), "retry") {
		t.Fatalf("picker %v", out)
	}
	if want := e.sc.Org.String() + "/" + e.sc.Project.String() + "/u1/google"; len(e.picker.asks) != 1 || e.picker.asks[0] != want {
		t.Fatalf("picker asked %v, want %s", e.picker.asks, want)
	}
	cfg := DefaultConfig()
	tk, _ := New(cfg)
	if _, err := tk.pickerURL(t.Context(), toolrunner.Call{}); toolrunner.AsError(err).Kind != "CONFIGURATION_ERROR" {
		t.Errorf("no picker: %v", err)
	}
}

var tabLine = regexp.MustCompile(`(?m)^@tab id=(\S+) .*title=(?:"([^"]*)"|(\S+))$`)

// tabIDs answers the DocMD's tab ids by title.
func tabIDs(md string) map[string]string {
	out := map[string]string{}
	for _, m := range tabLine.FindAllStringSubmatch(md, -1) {
		out[m[2]+m[3]] = m[1]
	}
	return out
}

// TestTabs: InsertTextAtEndOfDocument appends to the first tab of a
// document with tabs; GetDocumentMetadata nests the tabs with their own
// counts; GetDocumentAsDocmd renders one tab on request.
func TestTabs(t *testing.T) {
	e := newEnv(t)
	id := e.create(t, "Tabbed", "First tab text")
	first := tabIDs(e.docmdOf(t, id))
	if len(first) != 1 {
		t.Fatalf("tabs %v", first)
	}
	var firstID string
	for _, v := range first {
		firstID = v
	}
	out := obj(t, e.ok(t, "EditDocument", map[string]any{"document_id": id, "requests": js(t,
		`[{"addDocumentTab":{"tabProperties":{"title":"Second","index":1}}},{"addDocumentTab":{"tabProperties":{"title":"Child","parentTabId":"`+firstID+`"}}}]`)}))
	tabs := tabIDs(out["docmd"].(string))
	if tabs["Second"] == "" || tabs["Child"] == "" {
		t.Fatalf("tabs %v in\n%s", tabs, out["docmd"])
	}
	e.ok(t, "EditDocument", map[string]any{"document_id": id, "requests": js(t,
		`[{"insertText":{"text":"Second body","location":{"index":1,"tabId":"`+tabs["Second"]+`"}}}]`)})
	e.ok(t, "InsertTextAtEndOfDocument", map[string]any{"document_id": id, "text_content": "\nAPPENDED 😀"})

	one := e.ok(t, "GetDocumentAsDocmd", map[string]any{"document_id": id, "tab_id": firstID}).(string)
	second := e.ok(t, "GetDocumentAsDocmd", map[string]any{"document_id": id, "tab_id": tabs["Second"]}).(string)
	if !strings.Contains(one, "First tab text\n") || !strings.Contains(one, "APPENDED 😀") || strings.Contains(one, "Second body") ||
		!strings.Contains(second, "Second body") || strings.Contains(second, "APPENDED") {
		t.Fatalf("first tab:\n%s\nsecond tab:\n%s", one, second)
	}

	meta := obj(t, e.ok(t, "GetDocumentMetadata", map[string]any{"document_id": id}))
	top := meta["tabs"].([]map[string]any)
	firstText := "First tab text\nAPPENDED 😀\n" // 26 characters, 27 UTF-16 units
	if len(top) != 2 || top[0]["tab_id"] != firstID || top[0]["character_count"] != int64(26) || top[0]["end_index"] != int64(28) ||
		top[1]["title"] != "Second" || top[1]["character_count"] != int64(len("Second body\n")) {
		t.Fatalf("tabs %v (%q)", top, firstText)
	}
	kids := top[0]["child_tabs"].([]map[string]any)
	if len(kids) != 1 || kids[0]["title"] != "Child" || kids[0]["character_count"] != int64(1) || kids[0]["nesting_level"] != int64(1) {
		t.Fatalf("child tabs %v", kids)
	}
	if meta["total_characters"] != int64(26+12+1) {
		t.Errorf("total %v", meta["total_characters"])
	}

	// SearchAndRetrieveDocuments: the main body (first tab) and the tabs'
	// metadata only.
	for _, f := range []string{"docmd", "markdown", "html", "provider_api_json"} {
		res := obj(t, e.ok(t, "SearchAndRetrieveDocuments", map[string]any{"return_format": f}))
		d := res["documents"].([]map[string]any)[0]
		b, _ := json.Marshal(d["content"])
		tabs := d["tabs"].([]map[string]any)
		if !strings.Contains(string(b), "First tab text") || strings.Contains(string(b), "Second body") || len(tabs) != 2 ||
			len(tabs[0]["child_tabs"].([]map[string]any)) != 1 || tabs[0]["content"] != nil {
			t.Errorf("%s: %s\ntabs %v", f, b, tabs)
		}
	}
}
