package tlog_test

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/auditrail/auditrail/internal/tlog"
)

// BenchmarkParseEntry: an export line of the golden audit item (with its
// leaf_index) canonicalized and hashed, against the reference
// canonicalizer alone and encoding/json decoding the line.
func BenchmarkParseEntry(b *testing.B) {
	var m map[string]json.RawMessage
	raw, _ := json.Marshal(goldenItems()["audit_item"])
	_ = json.Unmarshal(raw, &m)
	m["leaf_index"] = json.RawMessage("123456")
	line, _ := json.Marshal(m)
	b.Run("ParseEntry", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(line)))
		buf := make([]byte, 0, 4096)
		for b.Loop() {
			if _, err := tlog.ParseEntry(buf[:0], line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gowebpki-jcs", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if _, err := jcs.Transform(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			var it map[string]any
			if err := json.Unmarshal(line, &it); err != nil {
				b.Fatal(err)
			}
		}
	})
}
