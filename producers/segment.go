package producers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/schemas"
)

// The outbox's record format. A segment is a sequence of records:
//
//	magic    4 bytes  A7 6F 62 02 ("\xa7ob\x02")
//	length   4 bytes  big-endian n, the length of the body
//	bodycrc  4 bytes  big-endian CRC-32C of the body
//	headcrc  4 bytes  big-endian CRC-32C of the 12 bytes above
//	body     n bytes  subject, event id, schema and payload, each prefixed
//	                  by its uvarint length
//
// The marker and the header checksum let a reader resynchronise: bytes that
// are not an intact record (a torn append, a corrupt block) are skipped up to
// the next marker that starts an intact record, so one bad record costs that
// record only. The header checksum also keeps a false marker inside a
// payload from claiming a body of up to maxRecord bytes.
//
// Segments written before this format (version 1: length, CRC-32C, body, no
// marker) are still read, to their first bad record: a segment in which no
// version-2 record is found is read as version 1. The two cannot be
// mistaken for each other: the marker read as a version-1 length is above
// maxRecord, and a version-1 segment holds a valid version-2 header only by
// a 2^-64 accident.
var recordMagic = [4]byte{0xa7, 'o', 'b', 0x02}

const (
	// recordHeader is the size of a record's header.
	recordHeader = 16
	// maxRecord bounds a record's body (a NATS message is at most 64 MiB).
	maxRecord = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Why bytes are not a record (sentinels: a scan meets many).
var (
	errHeaderCut  = errors.New("record header cut short")
	errNoMarker   = errors.New("no record marker")
	errHeaderCRC  = errors.New("record header checksum mismatch")
	errTooLarge   = errors.New("record larger than the maximum")
	errBodyCut    = errors.New("record body cut short")
	errBodyCRC    = errors.New("record checksum mismatch")
	errFieldRange = errors.New("record field out of bounds")
	errBodyForm   = errors.New("record body not in canonical form")
)

// recordBody is the body of m's record.
func recordBody(m *nats.Msg) []byte {
	fields := [4][]byte{[]byte(m.Subject), []byte(m.Header.Get(schemas.HeaderMsgID)), []byte(m.Header.Get(schemas.HeaderSchema)), m.Data}
	size := 0
	for _, f := range fields {
		size += uvarintLen(uint64(len(f))) + len(f)
	}
	body := make([]byte, 0, size)
	for _, f := range fields {
		body = binary.AppendUvarint(body, uint64(len(f)))
		body = append(body, f...)
	}
	return body
}

// encodeRecord frames m as one outbox record.
func encodeRecord(m *nats.Msg) []byte {
	body := recordBody(m)
	rec := make([]byte, recordHeader, recordHeader+len(body))
	copy(rec, recordMagic[:])
	binary.BigEndian.PutUint32(rec[4:8], uint32(len(body)))
	binary.BigEndian.PutUint32(rec[8:12], crc32.Checksum(body, castagnoli))
	binary.BigEndian.PutUint32(rec[12:16], crc32.Checksum(rec[:12], castagnoli))
	return append(rec, body...)
}

// segmentContents is what a segment's bytes hold.
type segmentContents struct {
	msgs []*nats.Msg
	// offsets[i] is where msgs[i]'s record starts.
	offsets []int
	// skipped counts the bytes that belong to no intact record: torn
	// appends, corrupt records, garbage.
	skipped int
	// why says why the first skipped bytes were skipped.
	why error
	// legacy: the segment is in the version-1 format.
	legacy bool
}

// decodeSegment finds every intact record of a segment. Whatever b holds, it
// returns at most len(b)/16 messages whose bodies alias b, and allocates
// nothing else in proportion to b.
func decodeSegment(b []byte) segmentContents {
	s := scanRecords(b)
	if len(s.msgs) == 0 && len(b) > 0 {
		if l := decodeLegacy(b); len(l.msgs) > 0 {
			return l
		}
	}
	return s
}

// scanRecords reads version-2 records, skipping what is not one.
func scanRecords(b []byte) (s segmentContents) {
	for p := 0; p < len(b); {
		m, n, err := recordAt(b[p:])
		if err == nil {
			s.msgs = append(s.msgs, m)
			s.offsets = append(s.offsets, p)
			p += n
			continue
		}
		if s.why == nil {
			s.why = fmt.Errorf("offset %d: %w", p, err)
		}
		next := bytes.Index(b[p+1:], recordMagic[:])
		if next < 0 {
			s.skipped += len(b) - p
			break
		}
		s.skipped += next + 1
		p += next + 1
	}
	return s
}

// recordAt decodes the record at the start of b and returns its length.
func recordAt(b []byte) (*nats.Msg, int, error) {
	if len(b) < recordHeader {
		return nil, 0, errHeaderCut
	}
	if !bytes.Equal(b[:4], recordMagic[:]) {
		return nil, 0, errNoMarker
	}
	if crc32.Checksum(b[:12], castagnoli) != binary.BigEndian.Uint32(b[12:16]) {
		return nil, 0, errHeaderCRC
	}
	n := binary.BigEndian.Uint32(b[4:8])
	if n > maxRecord {
		return nil, 0, errTooLarge
	}
	if uint64(len(b)-recordHeader) < uint64(n) {
		return nil, 0, errBodyCut
	}
	body := b[recordHeader : recordHeader+int(n)]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[8:12]) {
		return nil, 0, errBodyCRC
	}
	m, err := parseBody(body)
	if err != nil {
		return nil, 0, err
	}
	return m, recordHeader + int(n), nil
}

// parseBody decodes a record's body, refusing what recordBody does not write
// (trailing bytes, non-minimal lengths).
func parseBody(body []byte) (*nats.Msg, error) {
	var fields [4][]byte
	rest := body
	size := 0
	for i := range fields {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) {
			return nil, errFieldRange
		}
		fields[i], rest = rest[k:k+int(l)], rest[k+int(l):]
		size += uvarintLen(l) + int(l)
	}
	if len(rest) != 0 || size != len(body) {
		return nil, errBodyForm
	}
	m := nats.NewMsg(string(fields[0]))
	m.Header.Set(schemas.HeaderMsgID, string(fields[1]))
	m.Header.Set(schemas.HeaderContentType, schemas.ContentMsgpack)
	m.Header.Set(schemas.HeaderSchema, string(fields[2]))
	m.Data = fields[3]
	return m, nil
}

// decodeLegacy reads version-1 records (length, CRC-32C, body) up to the
// first that is not intact: that format cannot resynchronise.
func decodeLegacy(b []byte) (s segmentContents) {
	s.legacy = true
	p := 0
	for p < len(b) {
		rest := b[p:]
		if len(rest) < 8 {
			s.why = fmt.Errorf("offset %d: %w", p, errHeaderCut)
			break
		}
		n := binary.BigEndian.Uint32(rest[0:4])
		if n > maxRecord || uint64(n) > uint64(len(rest)-8) {
			s.why = fmt.Errorf("offset %d: record of %d bytes: %w", p, n, errBodyCut)
			break
		}
		body := rest[8 : 8+int(n)]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(rest[4:8]) {
			s.why = fmt.Errorf("offset %d: %w", p, errBodyCRC)
			break
		}
		m, err := parseBody(body)
		if err != nil {
			s.why = fmt.Errorf("offset %d: %w", p, err)
			break
		}
		s.msgs = append(s.msgs, m)
		s.offsets = append(s.offsets, p)
		p += 8 + int(n)
	}
	s.skipped = len(b) - p
	return s
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
