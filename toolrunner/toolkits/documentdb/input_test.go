package documentdb

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/toolrunner"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestCheckOneObject(t *testing.T) {
	tests := []struct {
		in   string
		want error // nil: accepted
	}{
		{`{}`, nil},
		{"  {\"status\":\"done\"}\n\t ", nil},
		{`{"_id":{"$oid":"65a1b2c3d4e5f60718293a4b"},"at":{"$gte":{"$date":"2026-01-01T00:00:00Z"}}}`, nil},
		{`{"a":[1,{"b":[null,true]}],"n":1e400}`, nil},
		{nested(`{"a":`, `}`, 100, `1`), nil},
		{nested(`{"a":`, `}`, 101, `1`), errTooDeep},
		{`{"a":` + nested(`[`, `]`, 100, ``) + `}`, errTooDeep},
		{nested(`{"a":`, `}`, 1_000_000, `1`), errTooDeep},
		{`{"a":` + strings.Repeat(`[`, 1_000_000), errTooDeep},
		{`{"status":"done"}xyz`, errTrailing},
		{`{"status":"done"}{"status":"paid"}`, errTrailing},
		{`{"$match":{}} {"$out":"x"}`, errTrailing},
		{`{"a":1}}`, errTrailing},
		{`{"a":1},`, errTrailing},
		{`{} null`, errTrailing},
		{`null`, errNotObject},
		{`[]`, errNotObject},
		{`[{"a":1}]`, errNotObject},
		{`"{}"`, errNotObject},
		{`1`, errNotObject},
		{`true`, errNotObject},
		{``, errEmpty},
		{"  \n\t", errEmpty},
		{"{\"a\":\"\xff\"}", errNotUTF8},
		{"\xfe{}", errNotUTF8},
		{`{"status":`, errInvalidJSON},
		{`{status:1}`, errInvalidJSON},
		{`x{}`, errInvalidJSON},
		{`{"a":1,}`, errInvalidJSON},
	}
	for _, tc := range tests {
		err := checkOneObject(tc.in)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%.60q: got %v, want %v", tc.in, err, tc.want)
		}
	}
}

func TestDecodeJSONParam(t *testing.T) {
	d, err := decodeJSONParam("filter_dict", ` {"_id":{"$oid":"65a1b2c3d4e5f60718293a4b"},"n":{"$gt":2}} `)
	if err != nil || len(d) != 2 || d[0].Key != "_id" || fmt.Sprintf("%T", d[0].Value) != "primitive.ObjectID" {
		t.Fatalf("extended JSON: %v %v", d, err)
	}
	if d, err := decodeJSONParam("projection", `{}`); err != nil || d == nil || len(d) != 0 {
		t.Fatalf("empty object: %#v %v", d, err)
	}
	for _, in := range []string{`{"a\u0000b":1}`, `{"a":[{"x\u0000":1}]}`, `{"a":{"$oid":"zz"}}`, `{"a":{"$date":{"$numberLong":"x"}}}`} {
		_, err := decodeJSONParam("filter_dict", in)
		te := toolrunner.AsError(err)
		if err == nil || te.Kind != toolrunner.KindInputInvalid || te.CanRetry || !strings.HasPrefix(te.Message, "filter_dict: ") {
			t.Errorf("%s: %v", in, err)
		}
	}
}

func TestSortEntry(t *testing.T) {
	tests := []struct {
		in   string
		want bson.E
		ok   bool
	}{
		{`{"field":"created_at","direction":-1}`, bson.E{Key: "created_at", Value: -1}, true},
		{`{"direction":1,"field":"_id"}`, bson.E{Key: "_id", Value: 1}, true},
		{`{"field":"a","direction":1.0}`, bson.E{Key: "a", Value: 1}, true},
		{`{"field":"a","direction":{"$numberLong":"-1"}}`, bson.E{Key: "a", Value: -1}, true},
		{`{"field":"a","direction":2}`, bson.E{}, false},
		{`{"field":"a","direction":"1"}`, bson.E{}, false},
		{`{"field":"a"}`, bson.E{}, false},
		{`{"field":"","direction":1}`, bson.E{}, false},
		{`{"field":1,"direction":1}`, bson.E{}, false},
		{`{"field":"a","direction":1,"extra":0}`, bson.E{}, false},
		{`{"field":"a","direction":1}{"field":"b","direction":1}`, bson.E{}, false},
	}
	for _, tc := range tests {
		e, err := sortEntry("sort[3]", tc.in)
		if tc.ok && (err != nil || e != tc.want) || !tc.ok && (err == nil || !strings.HasPrefix(toolrunner.AsError(err).Message, "sort[3]: ")) {
			t.Errorf("%s: %v %v", tc.in, e, err)
		}
	}
}

// badValue is one bad input for a parameter; param is the name the
// message must start with (an array element is named param[i]).
type badValue struct {
	what  string
	value any
	param string
}

// jsonBad are refused wherever JSON text is taken.
var jsonBad = []struct{ what, s string }{
	{"trailing garbage", `{"status":"done"}xyz`},
	{"two objects", `{"status":"done"}{"status":"paid"}`},
	{"two objects with a space", `{"$match":{}} {"$out":"x"}`},
	{"null", `null`},
	{"array", `[]`},
	{"array of an object", `[{"$match":{}}]`},
	{"string", `"{}"`},
	{"empty", ``},
	{"blank", "  "},
	{"invalid UTF-8", "{\"status\":\"\xff\xfe\"}"},
	{"nested 101 deep", nested(`{"a":`, `}`, 101, `1`)},
	{"nested 200,000 deep", `{"a":` + nested(`[`, `]`, 200_000, ``) + `}`},
	{"NUL in a field name", `{"a\u0000":1}`},
	{"truncated", `{"status":`},
}

// badInputs derives, from every tool's definition, every bad value of
// every parameter that takes a name or JSON text, with otherwise good
// inputs around it.
func badInputs(t *testing.T) map[string][]struct {
	badValue
	in map[string]any
} {
	good := map[string]any{"database_name": "shop", "collection_name": "orders", "pipeline": []any{}}
	arrayGood := map[string]string{"pipeline": `{"$match":{}}`, "sort": `{"field":"_id","direction":1}`}
	jsonParams := map[string]bool{"filter_dict": true, "projection": true, "pipeline": true, "sort": true}
	out := map[string][]struct {
		badValue
		in map[string]any
	}{}
	for _, tool := range New(DefaultConfig()).Tools() {
		def := tool.Definition()
		var bads []badValue
		for _, p := range def.Parameters {
			switch {
			case p.Name == "database_name" || p.Name == "collection_name":
				for _, v := range []struct{ what, s string }{{"empty", ""}, {"blank", "  "}, {"invalid UTF-8", "sh\xffop"}, {"NUL", "sh\x00op"}} {
					bads = append(bads, badValue{v.what, v.s, p.Name})
				}
			case jsonParams[p.Name] && p.Type == toolrunner.TypeString:
				for _, v := range jsonBad {
					bads = append(bads, badValue{v.what, v.s, p.Name})
				}
			case jsonParams[p.Name] && p.Type == toolrunner.TypeArrayString:
				for _, v := range jsonBad {
					bads = append(bads, badValue{v.what + " (first)", []any{v.s}, p.Name + "[0]"},
						badValue{v.what + " (second)", []any{arrayGood[p.Name], v.s}, p.Name + "[1]"})
				}
			case p.Type == toolrunner.TypeString || p.Type == toolrunner.TypeArrayString:
				t.Fatalf("%s.%s takes text: add its bad values here", def.Name, p.Name)
			}
		}
		if len(bads) == 0 && def.Name != "DiscoverDatabases" {
			t.Fatalf("%s: no bad input", def.Name)
		}
		for _, b := range bads {
			in := map[string]any{}
			for _, p := range def.Parameters {
				if v, ok := good[p.Name]; ok {
					in[p.Name] = v
				}
			}
			in[strings.TrimSuffix(strings.TrimSuffix(b.param, "[0]"), "[1]")] = b.value
			out[def.Name] = append(out[def.Name], struct {
				badValue
				in map[string]any
			}{b, in})
		}
	}
	return out
}

// Every tool × every bad input is TOOL_INPUT_INVALID, not retryable, named
// after the parameter, free of the connection string — and refused before
// the toolkit contacts the server: against a listener that counts its
// connections, none is made, and a connection string that is not one
// still gives the input error.
func TestBadInputsEveryTool(t *testing.T) {
	l, dialed := testenv.CountingListener(t)
	counting := "mongodb://user:s3cret-pw@" + l.Addr().String() + "/?serverSelectionTimeoutMS=500"

	cases := badInputs(t)
	for _, srv := range []struct{ name, uri string }{{"ferretdb", ""}, {"counting listener", counting}, {"not a connection string", "postgres://user:s3cret-pw@nowhere"}} {
		t.Run(srv.name, func(t *testing.T) {
			e := newEnv(t, srv.uri)
			n := 0
			for tool, list := range cases {
				for _, tc := range list {
					n++
					res := e.run(t, tool, tc.in)
					if res.Success {
						t.Errorf("%s %s %s: accepted", tool, tc.param, tc.what)
						continue
					}
					if res.Error.Kind != toolrunner.KindInputInvalid || res.Error.CanRetry || !strings.HasPrefix(res.Error.Message, tc.param+": ") ||
						strings.Contains(res.Error.Message, "s3cret") || strings.Contains(res.Error.Message, e.uri) {
						t.Errorf("%s %s %s: %+v", tool, tc.param, tc.what, res.Error)
					}
				}
			}
			if n < 100 {
				t.Fatalf("only %d cases", n)
			}
			if len(e.tk.clients) != 0 {
				t.Fatalf("%d clients opened for bad inputs", len(e.tk.clients))
			}
		})
	}
	if d := dialed.Settled(t); d != 0 {
		t.Fatalf("the toolkit connected %d times for bad inputs", d)
	}
}

func FuzzDecodeJSONParam(f *testing.F) {
	for _, s := range []string{`{}`, `{"status":"done"}`, `{"status":"done"}xyz`, `{"a":1}{"b":2}`, `null`, `[]`, ``, `  `,
		`{"_id":{"$oid":"65a1b2c3d4e5f60718293a4b"}}`, `{"at":{"$gte":{"$date":"2026-01-01T00:00:00Z"}}}`, `{"n":{"$numberDecimal":"1.5"}}`,
		"{\"a\":\"\xff\"}", nested(`{"a":`, `}`, 101, `1`), `{"a\u0000":1}`, `{"$match":{}} {"$out":"x"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := decodeJSONParam("filter_dict", s)
		if err != nil {
			te := toolrunner.AsError(err)
			if te.Kind != toolrunner.KindInputInvalid || te.CanRetry || !strings.HasPrefix(te.Message, "filter_dict: ") {
				t.Fatalf("%q: %+v", s, te)
			}
			return
		}
		// Accepted: one object, nothing after it, and a document the driver can send.
		if trimmed := strings.TrimSpace(s); !strings.HasPrefix(trimmed, "{") || !strings.HasSuffix(trimmed, "}") {
			t.Fatalf("%q accepted as %v", s, d)
		}
		if _, err := bson.Marshal(d); err != nil {
			t.Fatalf("%q accepted but not BSON: %v", s, err)
		}
		for _, more := range []string{s + "x", s + s, s + " {}", s + "null"} {
			if _, err := decodeJSONParam("filter_dict", more); err == nil {
				t.Fatalf("%q accepted", more)
			}
		}
	})
}

// An empty pipeline is a valid one: the appended $limit alone.
func TestEmptyPipelineIsAccepted(t *testing.T) {
	req, err := parseAggregate(map[string]any{"database_name": "shop", "collection_name": "orders", "pipeline": []string{}, "limit": int64(5)})
	if err != nil || len(req.pipeline) != 1 || req.pipeline[0][0].Key != "$limit" {
		t.Fatalf("%+v %v", req, err)
	}
}
