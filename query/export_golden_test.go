package query

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenEntries are fixed entries covering what an export must carry
// intact: a formula in a cell, a comma, quote and newline, unicode and
// null fields, and a salt (fixed: JSONL exports carry it, CSV ones do
// not).
func goldenEntries() []schemas.AuditEntry {
	org := uuid.MustParse("0193a5c0-0000-7000-8000-000000000001")
	project := uuid.MustParse("0193a5c0-0000-7000-8000-000000000002")
	customer := uuid.MustParse("0193a5c0-0000-7000-8000-000000000003")
	at := time.Date(2026, 11, 26, 8, 0, 0, 123e6, time.UTC)
	rt := schemas.ResourceTypeProject
	mk := func(n int, ev schemas.AuditEvent) schemas.AuditEntry {
		ev.EventID = uuid.MustParse("0193a5c0-0000-7000-8000-00000000010" + string(rune('0'+n)))
		ev.OrganizationID = org
		ev.Timestamp = at.Add(-time.Duration(n) * time.Minute)
		return schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: at.Add(time.Second)}
	}
	return []schemas.AuditEntry{
		mk(1, schemas.AuditEvent{Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI,
			DisplayName: "=HYPERLINK(\"http://evil\",\"x\")", PrincipalID: "+key", PrincipalType: "API_KEY",
			ClientIP: schemas.Ptr("@10.0.0.1"), ResourceType: &rt, ResourceID: schemas.Ptr("-1+2"),
			ResourceDisplay: schemas.Ptr("\tcmd"), ProjectID: &project, Data: json.RawMessage(`{"cmd": "=1+1"}`),
			Salt: goldenSalt(0)}),
		mk(2, schemas.AuditEvent{Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceDashboard,
			DisplayName: "Doe, \"J\"\nline two", PrincipalID: "u1", PrincipalType: "ACCOUNT", UserID: schemas.Ptr("u1"),
			CustomerID: &customer, ResourceType: &rt, ResourceDisplay: schemas.Ptr("a,b;c\r\nd"), Data: json.RawMessage(`{"k":"v, \"w\""}`)}),
		mk(3, schemas.AuditEvent{Action: schemas.AuditActionDeleted, Source: schemas.AuditSourceAPI,
			DisplayName: "Zoë 日本語 🚀", PrincipalID: "p", PrincipalType: "ACCOUNT", ResourceDisplay: schemas.Ptr("Ärger"),
			Salt: goldenSalt(0xf0)}),
		mk(4, schemas.AuditEvent{Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI,
			DisplayName: "nulls", PrincipalID: "p", PrincipalType: "ACCOUNT"}),
		// A formula after a separator of another locale: quoted and defused.
		mk(5, schemas.AuditEvent{Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI,
			DisplayName: "laptop;=1+cmd|' /C calc'!A0", PrincipalID: "p", PrincipalType: "ACCOUNT",
			ResourceDisplay: schemas.Ptr("a\t@SUM(A1)"), Data: json.RawMessage(`{"n":[1,-5],"s":"x;-2+3"}`)}),
	}
}

func goldenExecutions() []auditstore.Execution {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	return []auditstore.Execution{
		{ExecutionEvent: schemas.ExecutionEvent{EventID: "0193a5c0-0000-7000-8000-000000000201", ExecutionID: "0193a5c0-0000-7000-8000-000000000201",
			OrganizationID: "0193a5c0-0000-7000-8000-000000000001", ProjectID: "0193a5c0-0000-7000-8000-000000000002", UserID: "=user",
			PrincipalID: "k1", PrincipalType: "API_KEY", DisplayName: "Bot, \"the\"", ClientIP: "10.0.0.2",
			Tool: schemas.ToolRef{Toolkit: "DocsToolkit", Name: "GetDocument", Version: "1.0.0"}, StartedAt: at, EndedAt: at.Add(1500 * time.Microsecond),
			DurationMS: 1.5, Success: true, ExecutionCode: "OK",
			Hooks: []schemas.HookCall{{HookID: "h1", HookName: "gate", Point: "access", Code: "OK", HTTPStatus: 200, Attempts: 1, LatencyMS: 3}},
			Salt:  goldenSalt(0x80)},
			CreatedTime: at.Add(time.Second)},
		{ExecutionEvent: schemas.ExecutionEvent{EventID: "0193a5c0-0000-7000-8000-000000000202", ExecutionID: "0193a5c0-0000-7000-8000-000000000202",
			OrganizationID: "0193a5c0-0000-7000-8000-000000000001", UserID: "ünï", PrincipalID: "u", PrincipalType: "ACCOUNT", DisplayName: "U",
			Tool: schemas.ToolRef{Toolkit: "MailToolkit", Name: "SendEmail", Version: "0.2.0"}, StartedAt: at.Add(-time.Minute), EndedAt: at.Add(-time.Minute),
			Success: false, ExecutionCode: "TOOL_ERROR", ErrorKind: "upstream", ExecutionError: "-boom\nsecond line"},
			CreatedTime: at},
	}
}

// goldenSalt is a fixed salt: schemas.SaltBytes bytes counting from b.
func goldenSalt(b byte) []byte {
	s := make([]byte, schemas.SaltBytes)
	for i := range s {
		s[i] = b + byte(i)
	}
	return s
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n got: %q\nwant: %q", name, got, want)
	}
}

// The encoders of the exports write the golden files: CSV with the seed's
// header, defused formulas, quoted commas, quotes and newlines, unicode
// as is and empty cells for null; JSONL with the list items.
func TestExportGolden(t *testing.T) {
	entries, execs := goldenEntries(), goldenExecutions()
	for _, tc := range []struct{ name, format string }{
		{"export_audit.csv", FormatCSV}, {"export_audit.jsonl", FormatJSONL},
		{"export_executions.csv", FormatCSV}, {"export_executions.jsonl", FormatJSONL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if filepath.Base(tc.name)[:len("export_audit")] == "export_audit" {
				enc := newAuditEncoder(tc.format)
				if err := enc.start(&buf); err != nil {
					t.Fatal(err)
				}
				for i := range entries {
					if err := enc.write(&buf, apiitem.NewItem(&entries[i])); err != nil {
						t.Fatal(err)
					}
				}
				if err := enc.flush(); err != nil {
					t.Fatal(err)
				}
			} else {
				enc := newExecutionEncoder(tc.format)
				if err := enc.start(&buf); err != nil {
					t.Fatal(err)
				}
				for i := range execs {
					if err := enc.write(&buf, apiitem.NewExecutionItem(&execs[i])); err != nil {
						t.Fatal(err)
					}
				}
				if err := enc.flush(); err != nil {
					t.Fatal(err)
				}
			}
			checkGolden(t, tc.name, buf.Bytes())
		})
	}
}

func TestCSVSafe(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "a": "a", "=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)",
		"\tx": "'\tx", "\rx": "'\rx", "a=b": "a=b", "'=x": "'=x", "日本": "日本",
		// After a separator a spreadsheet of another locale (or a TSV
		// reader) splits on, a trigger is defused too.
		"laptop;=1+cmd|' /C calc'!A0": "laptop;'=1+cmd|' /C calc'!A0", "a;b": "a;b", "a;": "a;",
		"=a;@b;c": "'=a;'@b;c", "x\n=1": "x\n'=1", "x\r\n+1": "x\r\n'+1", "a\t-1": "a\t'-1",
		// A comma is not such a place: the cell is quoted, and JSON keeps
		// its negative numbers.
		"[1,-5]": "[1,-5]", "a,=b": "a,=b",
	} {
		if got := CSVSafe(in); got != want {
			t.Errorf("CSVSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{"csv", "csv", true}, {"jsonl", "jsonl", true}, {"", "", false}, {"CSV", "", false}, {"xml", "", false}} {
		got, err := parseFormat(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseFormat(%q) = %q, %v", tc.in, got, err)
		}
		if err != nil && !bytes.Contains([]byte(err.Error()), []byte("format")) {
			t.Errorf("parseFormat(%q): %v does not name format", tc.in, err)
		}
	}
}

// A row read back by an RFC 4180 reader (encoding/csv) gives each cell as
// CSVSafe made it, whatever the cells hold; and no part of a cell that a
// spreadsheet could split off at a separator begins with a formula.
func FuzzCSVRow(f *testing.F) {
	for _, seed := range []string{"laptop;=1+cmd", "a,b", "\"q\"", "x\r\n=1", " lead", "\t@x", "日本;+1"} {
		f.Add(seed, "plain")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return // cells are JSON strings: valid UTF-8
		}
		enc := &encoder[string]{csv: true}
		var buf bytes.Buffer
		enc.out = &buf
		if err := enc.writeRow([]string{a, b}); err != nil {
			t.Fatal(err)
		}
		if err := enc.flush(); err != nil {
			t.Fatal(err)
		}
		r := csv.NewReader(&buf)
		r.LazyQuotes = false
		rows, err := r.ReadAll()
		if err != nil || len(rows) != 1 || len(rows[0]) != 2 {
			t.Fatalf("%q: read back %q, %v", buf.String(), rows, err)
		}
		// encoding/csv drops a CR before an LF inside a quoted cell.
		norm := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
		for i, in := range []string{a, b} {
			want := CSVSafe(in)
			if rows[0][i] != norm(want) {
				t.Fatalf("cell %q: read back %q, want %q", in, rows[0][i], want)
			}
			for _, part := range strings.FieldsFunc(want, func(r rune) bool { return r == ';' || r == '\t' || r == '\r' || r == '\n' }) {
				if part != "" && csvTrigger(part[0]) && !strings.HasPrefix(want, part) {
					t.Fatalf("cell %q: the part %q after a separator begins with a formula", in, part)
				}
			}
		}
	})
}
