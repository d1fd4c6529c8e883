package schemas

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func BenchmarkUnmarshalAuditEvent(b *testing.B) {
	ev := sampleEvent()
	data, _ := ev.Marshal()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnmarshalAuditEvent(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenericMsgpackDecode is the reference: msgpack's generic decoder
// into a map, which validates nothing.
func BenchmarkGenericMsgpackDecode(b *testing.B) {
	ev := sampleEvent()
	data, _ := ev.Marshal()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := msgpack.Unmarshal(data, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalAuditEvent(b *testing.B) {
	ev := sampleEvent()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}
