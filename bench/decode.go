package bench

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/schemas"
)

// Decode measures the audit/v1 decoder (which validates every field and
// transcodes data to JSON) against msgpack's generic decoder into a map
// (which validates nothing), on the same payloads.
func Decode() Figure {
	gen := synth.New(uuid.New(), 3, 7)
	payloads := make([][]byte, 1024)
	for i := range payloads {
		ev := gen.Event(time.Now())
		payloads[i], _ = ev.Marshal()
	}
	ours := testing.Benchmark(func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := schemas.UnmarshalAuditEvent(payloads[i%len(payloads)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	ref := testing.Benchmark(func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			var m map[string]any
			if err := msgpack.Unmarshal(payloads[i%len(payloads)], &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	perSec := func(r testing.BenchmarkResult) float64 { return 1e9 / float64(r.NsPerOp()) }
	return Figure{Name: "audit/v1 decode (events/s, one core)", Value: perSec(ours), Unit: "ev/s",
		Reference: perSec(ref), RefName: "msgpack generic decode into a map", Goal: 1}
}
