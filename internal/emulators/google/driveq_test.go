package google

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	drive "google.golang.org/api/drive/v3"
)

func TestParseQuery(t *testing.T) {
	tests := []struct {
		q, want string // want "" with err: refused
	}{
		{"", ""},
		{"trashed = false", "trashed = false"},
		{"TRASHED = FALSE", ""}, // field names are case-sensitive
		{"trashed = TRUE", "trashed = true"},
		{`name contains 'O\'Brien'`, `name contains 'O\'Brien'`},
		{`name contains 'a\\b'`, `name contains 'a\\b'`},
		{"a = 'x'", ""},
		{"name contains 'x' and trashed = false or starred = true", "((name contains 'x' and trashed = false) or starred = true)"},
		{"name contains 'x' and (trashed = false or starred = true)", "(name contains 'x' and (trashed = false or starred = true))"},
		{"not not trashed = true", "not not trashed = true"},
		{"'root' in parents", "'root' in parents"},
		{"'root' IN parents", "'root' in parents"},
		{"modifiedTime >= '2026-01-02T03:04:05Z'", "modifiedTime >= '2026-01-02T03:04:05Z'"},
		{"modifiedTime >= '2026-13-02T03:04:05Z'", ""},
		{"name <= 'x'", ""},
		{"fullText = 'x'", ""},
		{"trashed contains 'x'", ""},
		{"name = 'x' and", ""},
		{"()", ""},
		{"name = 'x')", ""},
		{"name = 'x' 'y'", ""},
		{"name = \"x\"", ""},
		{`name = 'bad\n'`, ""},
		{"name = 'x' ! trashed", ""},
		{"not", ""},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			n, err := parseQuery(tt.q)
			if tt.want == "" && tt.q != "" {
				if !errors.Is(err, errBadQuery) {
					t.Fatalf("accepted: %v", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if n != nil {
				got = n.String()
			}
			if got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestQueryEval(t *testing.T) {
	f := &driveFile{ID: "1", Name: "Quarterly O'Brien report", MimeType: MimeTypeDocument, Owner: "u1",
		OwnerEmail: "ann@example.com", Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Modified: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
	body := `Path C:\data\x; numbers rise`
	tests := []struct {
		q    string
		want bool
	}{
		{"name contains 'quarterly'", true},
		{"name contains 'report'", true},
		{"name contains 'port'", false},
		{`name contains 'o\'brien'`, true},
		{`name contains 'brien'`, true}, // the apostrophe separates words
		{"name = 'Quarterly O''Brien report'", false},
		{`fullText contains 'C:\\data'`, true},
		{`fullText contains 'data'`, true},
		{`fullText contains 'ata'`, false},
		{`fullText contains 'numbers quarterly'`, true},
		{`fullText contains '"rise numbers"'`, false},
		{"createdTime < '2026-01-15' and modifiedTime > '2026-01-15'", true},
		{"modifiedTime = '2026-02-01T00:00:00Z'", true},
		{"'me' in owners", true},
		{"'ANN@example.com' in owners", true},
		{"'ben@example.com' in writers", false},
		{"sharedWithMe = true", false},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			n, err := parseQuery(tt.q)
			if err != nil {
				if strings.Contains(tt.q, "''") {
					return // '' is not an escape: refused, fine
				}
				t.Fatal(err)
			}
			if got := n.eval(&qCtx{f: f, userID: "u1", text: func() string { return body }}); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

// FuzzDriveQuery: the parser never panics, and an accepted query's
// canonical form parses back to the same canonical form.
func FuzzDriveQuery(f *testing.F) {
	for _, s := range []string{"trashed = false", `name contains 'O\'Brien' and not fullText contains 'a\\b'`,
		"(starred = true or 'root' in parents) and modifiedTime > '2026-01-01T00:00:00Z'", "not (name = 'x')", "((", "'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, err := parseQuery(q)
		if err != nil || n == nil {
			return
		}
		s := n.String()
		m, err := parseQuery(s)
		if err != nil {
			t.Fatalf("canonical %q of %q refused: %v", s, q, err)
		}
		if m.String() != s {
			t.Fatalf("round trip: %q -> %q", s, m.String())
		}
		n.eval(&qCtx{f: &driveFile{}, text: func() string { return q }})
	})
}

func TestParseFields(t *testing.T) {
	tests := []struct {
		in, want string // want "" : refused
	}{
		{"files(id,name),nextPageToken", `{"files":[{"id":"1","name":"a"}],"nextPageToken":"t"}`},
		{"files(id, name) , nextPageToken", `{"files":[{"id":"1","name":"a"}],"nextPageToken":"t"}`},
		{"files/id", `{"files":[{"id":"1"}]}`},
		{"files(owners(emailAddress))", `{"files":[{"owners":[{"emailAddress":"e"}]}]}`},
		{"files(owners/emailAddress,id)", `{"files":[{"id":"1","owners":[{"emailAddress":"e"}]}]}`},
		{"*", `{"files":[{"id":"1","name":"a","owners":[{"emailAddress":"e","me":true}]}],"kind":"drive#fileList","nextPageToken":"t"}`},
		{"files(*)", `{"files":[{"id":"1","name":"a","owners":[{"emailAddress":"e","me":true}]}]}`},
		{"kind,files", `{"files":[{"id":"1","name":"a","owners":[{"emailAddress":"e","me":true}]}],"kind":"drive#fileList"}`},
		{"files(nope)", ""},
		{"files(id", ""},
		{"files()", ""},
		{"bogus", ""},
		{"files(id,,name)", ""},
		{"nextPageToken(id)", ""},
		{"files(id)x", ""},
	}
	v := map[string]any{"kind": "drive#fileList", "nextPageToken": "t", "files": []any{map[string]any{"id": "1", "name": "a",
		"owners": []any{map[string]any{"emailAddress": "e", "me": true}}}}}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := parseFields(tt.in, reflect.TypeFor[drive.FileList]())
			if tt.want == "" {
				if !errors.Is(err, errBadFields) {
					t.Fatalf("accepted: %v", m)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(m.apply(v))
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// FuzzFieldMask: a `fields` mask from a client never panics the parser or
// the projection, and the projection keeps only names the mask holds.
func FuzzFieldMask(f *testing.F) {
	for _, s := range []string{"files(id,name),nextPageToken", "*", "files/owners/emailAddress", "files(owners(me)", "a,,b", "files(*)"} {
		f.Add(s)
	}
	v := map[string]any{"kind": "drive#fileList", "nextPageToken": "t", "files": []any{map[string]any{"id": "1",
		"owners": []any{map[string]any{"emailAddress": "e"}}}}}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseFields(s, reflect.TypeFor[drive.FileList]())
		if err != nil {
			return
		}
		out, _ := m.apply(v).(map[string]any)
		for k := range out {
			if _, ok := m[k]; !ok {
				if _, star := m["*"]; !star {
					t.Fatalf("%q kept %q", s, k)
				}
			}
		}
	})
}
