package documentdb

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"github.com/auditrail/auditrail/toolrunner"
)

// nestedBSON builds a document nested n levels deep ({"a":{"a":…{}}}, or
// arrays), in linear time, as a hostile server would send it.
func nestedBSON(n int, array bool) []byte {
	typ, key := byte(0x03), byte('a')
	if array {
		typ, key = 0x04, '0'
	}
	// Level k from the inside is 5 + 8(k-1) bytes long.
	out := make([]byte, 0, 8*n)
	for k := n; k > 1; k-- {
		out = binary.LittleEndian.AppendUint32(out, uint32(5+8*(k-1)))
		out = append(out, typ, key, 0)
	}
	out = append(out, 5, 0, 0, 0, 0)
	for k := 1; k < n; k++ {
		out = append(out, 0)
	}
	return out
}

func TestDepth(t *testing.T) {
	flat, _ := bson.Marshal(bson.D{{Key: "s", Value: "x"}, {Key: "n", Value: int32(1)}, {Key: "f", Value: 1.5}, {Key: "b", Value: true},
		{Key: "d", Value: primitive.NewDateTimeFromTime(primitive.NilObjectID.Timestamp())}, {Key: "o", Value: primitive.NewObjectID()},
		{Key: "nil", Value: nil}, {Key: "l", Value: int64(2)}, {Key: "bin", Value: primitive.Binary{Subtype: 0, Data: []byte("abc")}},
		{Key: "re", Value: primitive.Regex{Pattern: "a.*", Options: "i"}}, {Key: "dec", Value: primitive.NewDecimal128(1, 2)},
		{Key: "ts", Value: primitive.Timestamp{T: 1, I: 2}}, {Key: "min", Value: primitive.MinKey{}}, {Key: "max", Value: primitive.MaxKey{}},
		{Key: "js", Value: primitive.JavaScript("f()")}, {Key: "sym", Value: primitive.Symbol("s")},
		{Key: "cws", Value: primitive.CodeWithScope{Code: "f()", Scope: bson.D{{Key: "x", Value: 1}}}}})
	two, _ := bson.Marshal(bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.A{1, bson.D{{Key: "c", Value: 1}}}}}}})
	tests := []struct {
		name    string
		doc     []byte
		want    int
		wantErr string
	}{
		{"flat, every scalar type", flat, 1, ""},
		{"document in array in document", two, 4, ""},
		{"100 levels", nestedBSON(100, false), 100, ""},
		{"101 levels stops counting past the limit", nestedBSON(101, false), 101, ""},
		{"a million levels", nestedBSON(1_000_000, false), 101, ""},
		{"arrays a million levels deep", nestedBSON(1_000_000, true), 101, ""},
		{"too short", []byte{4, 0, 0}, 0, "too short"},
		{"length past the bytes", []byte{50, 0, 0, 0, 0}, 0, "does not fit"},
		{"negative length", []byte{0xff, 0xff, 0xff, 0xff, 0}, 0, "does not fit"},
		{"no terminator", []byte{5, 0, 0, 0, 1}, 0, "terminator"},
		{"string length past the document", append([]byte{14, 0, 0, 0, 2, 'a', 0, 0xff, 0xff, 0, 0}, 'x', 0, 0), 0, "bad length"},
		{"unknown type", []byte{8, 0, 0, 0, 0x42, 'a', 0, 0}, 0, "unknown type"},
		{"embedded length larger than its parent", []byte{12, 0, 0, 0, 3, 'a', 0, 100, 0, 0, 0, 0}, 0, "bad length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := depth(tc.doc, MaxDepth)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("depth = %d, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("depth = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// fakeCursor serves documents as a hostile server would.
type fakeCursor struct {
	docs   [][]byte
	i      int
	closed bool
}

func (c *fakeCursor) Next(context.Context) bool   { c.i++; return c.i <= len(c.docs) }
func (c *fakeCursor) Err() error                  { return nil }
func (c *fakeCursor) Close(context.Context) error { c.closed = true; return nil }
func (c *fakeCursor) current() bson.Raw           { return c.docs[c.i-1] }

// What a hostile server answers costs one call (an UPSTREAM_ERROR), never
// the process: more documents than the limit, a document a million levels
// deep (rendering it recursively would overflow the stack, which no recover
// catches), a result larger than the cap, a malformed document.
func TestCollectRefusesHostileAnswers(t *testing.T) {
	small, _ := bson.Marshal(bson.D{{Key: "x", Value: 1}})
	big, _ := bson.Marshal(bson.D{{Key: "x", Value: strings.Repeat("y", 600)}})
	tests := []struct {
		name   string
		docs   [][]byte
		limit  int64
		max    int
		errHas string
	}{
		{"within bounds", [][]byte{small, small}, 2, 1 << 20, ""},
		{"more documents than asked", [][]byte{small, small, small}, 2, 1 << 20, "more than the 2 documents"},
		{"a million levels deep", [][]byte{small, nestedBSON(1_000_000, false)}, 10, 1 << 20, "deeper than 100 levels"},
		{"larger than the cap", [][]byte{big, big}, 10, 1000, "larger than"},
		{"malformed", [][]byte{{9, 0, 0, 0, 2, 'a', 0, 0xff, 0}}, 10, 1 << 20, "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := &fakeCursor{docs: tc.docs}
			out, err := collect(context.Background(), cur, tc.limit, tc.max)
			if !cur.closed {
				t.Error("cursor not closed")
			}
			if tc.errHas == "" {
				if err != nil || len(out) != len(tc.docs) {
					t.Fatalf("collect = %v, %v", out, err)
				}
				return
			}
			te := toolrunner.AsError(err)
			if err == nil || te.Kind != toolrunner.KindUpstream || !strings.Contains(te.Message, tc.errHas) {
				t.Fatalf("collect = %d docs, %v; want UPSTREAM_ERROR with %q", len(out), err, tc.errHas)
			}
		})
	}
}

// FuzzDepth: whatever bytes a server sends, depth answers without
// panicking, and agrees with the driver's validation on documents it accepts.
func FuzzDepth(f *testing.F) {
	for _, d := range [][]byte{nestedBSON(3, false), nestedBSON(5, true), {5, 0, 0, 0, 0}} {
		f.Add(d)
	}
	doc, _ := bson.Marshal(bson.D{{Key: "a", Value: bson.A{1, "s", bson.D{{Key: "b", Value: nil}}}}, {Key: "r", Value: primitive.Regex{Pattern: "p", Options: "i"}}})
	f.Add(doc)
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := depth(b, MaxDepth)
		if err == nil && d < 1 {
			t.Fatalf("depth %d without error", d)
		}
		if err == nil && d <= MaxDepth {
			// A document depth accepts is one the renderer can walk.
			if _, jerr := toJSON(bson.Raw(b)); jerr != nil {
				return // the driver is stricter (UTF-8, value rules): refused, not crashed
			}
		}
	})
}

// Against a real server (FerretDB), through the runner: a result larger
// than MaxOutputBytes fails the call with a message that says what to do;
// a smaller one still succeeds.
func TestOutputCapThroughTheRunner(t *testing.T) {
	e := newEnv(t, "")
	e.tk.cfg.MaxOutputBytes = 2000
	in := map[string]any{"database_name": "shop", "collection_name": "orders", "limit": 100.0}
	res := e.run(t, "FindDocuments", in)
	if res.Success || res.Error.Kind != toolrunner.KindUpstream || !strings.Contains(res.Error.Message, "narrow the filter") {
		t.Fatalf("find over the cap: %+v", res)
	}
	res = e.run(t, "AggregateDocuments", map[string]any{"database_name": "shop", "collection_name": "orders", "pipeline": []any{`{"$match":{}}`}, "limit": 100.0})
	if res.Success || res.Error.Kind != toolrunner.KindUpstream {
		t.Fatalf("aggregate over the cap: %+v", res)
	}
	in["limit"] = 2.0
	if out := e.ok(t, "FindDocuments", in); len(out.([]string)) != 2 {
		t.Fatalf("find under the cap: %v", out)
	}
}
