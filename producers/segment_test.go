package producers

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/schemas"
)

func testMsg(id string, data []byte) *nats.Msg {
	m := nats.NewMsg("auditrail.events.o.execution")
	m.Header.Set(schemas.HeaderMsgID, id)
	m.Header.Set(schemas.HeaderSchema, schemas.SchemaExecutionV1)
	m.Data = data
	return m
}

// encodeRecordV1 frames m in the format of the first outbox (length,
// CRC-32C, body), which segments left on disk may still hold.
func encodeRecordV1(m *nats.Msg) []byte {
	body := recordBody(m)
	rec := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(rec[0:4], uint32(len(body)))
	binary.BigEndian.PutUint32(rec[4:8], crc32.Checksum(body, castagnoli))
	return append(rec, body...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// falseHeader is a marker with a valid header checksum claiming a body of n
// bytes that is not there.
func falseHeader(n uint32) []byte {
	h := make([]byte, recordHeader)
	copy(h, recordMagic[:])
	binary.BigEndian.PutUint32(h[4:8], n)
	binary.BigEndian.PutUint32(h[8:12], 0xdeadbeef)
	binary.BigEndian.PutUint32(h[12:16], crc32.Checksum(h[:12], castagnoli))
	return h
}

// A segment with torn or corrupt bytes anywhere: every intact record is
// found, and the bytes skipped are those of no intact record.
func TestDecodeSegmentResynchronises(t *testing.T) {
	r := make([][]byte, 4)
	for i := range r {
		r[i] = encodeRecord(testMsg(fmt.Sprint("id", i), bytes.Repeat([]byte{byte(i)}, 40+i)))
	}
	corrupt := bytes.Clone(r[1])
	corrupt[len(corrupt)-3] ^= 0xff
	v1 := [][]byte{encodeRecordV1(testMsg("v0", []byte{1})), encodeRecordV1(testMsg("v1", []byte{2}))}
	garbage := []byte("\x00\x00\x01\x00garbage\xa7o")
	tests := []struct {
		name    string
		seg     []byte
		ids     []string
		skipped int
		legacy  bool
	}{
		{"empty", nil, nil, 0, false},
		{"intact", cat(r[0], r[1], r[2]), []string{"id0", "id1", "id2"}, 0, false},
		{"torn tail", cat(r[0], r[1], r[2][:20]), []string{"id0", "id1"}, 20, false},
		{"torn record in the middle", cat(r[0], r[1][:30], r[2], r[3]), []string{"id0", "id2", "id3"}, 30, false},
		{"torn header in the middle", cat(r[0], r[1][:7], r[2]), []string{"id0", "id2"}, 7, false},
		{"garbage in the middle", cat(r[0], garbage, r[1], r[2]), []string{"id0", "id1", "id2"}, len(garbage), false},
		{"garbage first", cat(garbage, r[0], r[1]), []string{"id0", "id1"}, len(garbage), false},
		{"corrupt record", cat(r[0], corrupt, r[2]), []string{"id0", "id2"}, len(corrupt), false},
		{"marker claiming a long body", cat(r[0], falseHeader(1<<20), r[1]), []string{"id0", "id1"}, recordHeader, false},
		{"marker claiming too long a body", cat(falseHeader(maxRecord+1), r[0]), []string{"id0"}, recordHeader, false},
		{"only garbage", garbage, nil, len(garbage), false},
		{"previous format", cat(v1[0], v1[1]), []string{"v0", "v1"}, 0, true},
		{"previous format, torn tail", cat(v1[0], v1[1][:9]), []string{"v0"}, 9, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := decodeSegment(tc.seg)
			var ids []string
			for _, m := range s.msgs {
				ids = append(ids, m.Header.Get(schemas.HeaderMsgID))
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.ids) || s.skipped != tc.skipped || s.legacy != tc.legacy {
				t.Fatalf("decoded %v, %d bytes skipped, legacy %v (%v)\nwant    %v, %d bytes skipped, legacy %v",
					ids, s.skipped, s.legacy, s.why, tc.ids, tc.skipped, tc.legacy)
			}
			if (s.skipped > 0) != (s.why != nil) {
				t.Fatalf("skipped %d bytes, why %v", s.skipped, s.why)
			}
		})
	}
}

// checkDecoded decodes b and checks what any decoding must hold: every
// record re-encodes to the bytes where it was found, records do not
// overlap, and records plus skipped bytes are all of b.
func checkDecoded(t *testing.T, b []byte) segmentContents {
	s := decodeSegment(b)
	if len(s.msgs) != len(s.offsets) || len(s.msgs) > len(b)/8 {
		t.Fatalf("%d messages, %d offsets from %d bytes", len(s.msgs), len(s.offsets), len(b))
	}
	covered, end := 0, 0
	for i, m := range s.msgs {
		enc := encodeRecord(m)
		if s.legacy {
			enc = encodeRecordV1(m)
		}
		off := s.offsets[i]
		if off < end || off+len(enc) > len(b) || !bytes.Equal(b[off:off+len(enc)], enc) {
			t.Fatalf("record %d at %d does not re-encode to its bytes", i, off)
		}
		covered += len(enc)
		end = off + len(enc)
	}
	if covered+s.skipped != len(b) {
		t.Fatalf("records %d + skipped %d bytes != %d bytes", covered, s.skipped, len(b))
	}
	return s
}

// FuzzDecodeRecords: whatever bytes a segment holds, the decoder does not
// panic, allocates in proportion to the records it finds (bodies alias the
// input), and finds every intact record placed among them.
func FuzzDecodeRecords(f *testing.F) {
	rec := encodeRecord(testMsg("id", []byte{0x80}))
	f.Add(rec, uint16(0), []byte{1})
	f.Add(cat(rec, rec[:5]), uint16(3), []byte{})
	f.Add([]byte{}, uint16(0), []byte{})
	f.Add(cat([]byte("junk"), rec, rec[:20], rec), uint16(9), []byte("payload"))
	f.Add(cat(falseHeader(40), rec), uint16(16), recordMagic[:])
	f.Add(cat(encodeRecordV1(testMsg("a", []byte{1})), encodeRecordV1(testMsg("b", nil))), uint16(5), []byte{})
	f.Fuzz(func(t *testing.T, b []byte, cut uint16, data []byte) {
		checkDecoded(t, b)

		// Two intact records placed in b: each is found where it is, unless
		// an intact record that b happens to hold overlaps it.
		c := int(cut) % (len(b) + 1)
		recA, recB := encodeRecord(testMsg("A", data)), encodeRecord(testMsg("B", b))
		in := cat(b[:c], recA, b[c:], recB)
		s := checkDecoded(t, in)
		if s.legacy {
			t.Fatalf("segment with intact records read as the previous format")
		}
		for _, want := range []struct {
			id  string
			off int
		}{{"A", c}, {"B", len(in) - len(recB)}} {
			found := false
			for i, m := range s.msgs {
				off, end := s.offsets[i], s.offsets[i]+len(encodeRecord(m))
				if off == want.off && m.Header.Get(schemas.HeaderMsgID) == want.id ||
					off < want.off && want.off < end {
					found = true
				}
			}
			if !found {
				t.Fatalf("intact record %s at %d not found (records at %v)", want.id, want.off, s.offsets)
			}
		}
	})
}

// BenchmarkDecodeSegment reads a full segment (4096 records of 1 KiB), and
// one megabyte of garbage with a false marker every 97 bytes.
func BenchmarkDecodeSegment(b *testing.B) {
	var full []byte
	for i := range 4096 {
		full = append(full, encodeRecord(testMsg(fmt.Sprint(i), bytes.Repeat([]byte{1}, 1024)))...)
	}
	garbage := make([]byte, 1<<20)
	for i := range garbage {
		garbage[i] = byte(i * 7919 >> 3)
	}
	for i := 0; i+4 <= len(garbage); i += 97 {
		copy(garbage[i:], recordMagic[:])
	}
	for _, bc := range []struct {
		name string
		seg  []byte
		msgs int
	}{{"intact", full, 4096}, {"garbage", garbage, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.seg)))
			b.ReportAllocs()
			for b.Loop() {
				if s := decodeSegment(bc.seg); len(s.msgs) != bc.msgs {
					b.Fatalf("%d records, want %d", len(s.msgs), bc.msgs)
				}
			}
		})
	}
}
