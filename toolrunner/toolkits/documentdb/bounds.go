package documentdb

import (
	"context"
	"encoding/binary"
	"fmt"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/auditrail/auditrail/toolrunner"
)

// A database server is chosen by the tenant (DB_CONNECTION_STRING), so what
// it answers is hostile input: it may ignore a limit, send documents nested
// a million levels deep (a recursive renderer would overflow the stack,
// which no recover catches) or answer gigabytes. These bounds make such an
// answer cost one tool call, never the process.
const (
	// MaxDepth is how deeply a document may nest (MongoDB's own limit is
	// 100 levels of embedded documents and arrays).
	MaxDepth = 100
	// DefaultMaxOutputBytes bounds the JSON of one result (16 MiB).
	DefaultMaxOutputBytes = 16 << 20
	// maxFields bounds the distinct field paths GetCollectionSchema reports.
	maxFields = 10_000
)

// depth answers how deeply a BSON document nests (1 for a flat document),
// without recursion, and an error for a document that is not well formed.
// It stops counting past limit.
func depth(doc []byte, limit int) (int, error) {
	type frame struct{ end int }
	if len(doc) < 5 {
		return 0, fmt.Errorf("document of %d bytes is too short", len(doc))
	}
	size := int(int32(binary.LittleEndian.Uint32(doc)))
	if size < 5 || size > len(doc) {
		return 0, fmt.Errorf("document length %d does not fit its %d bytes", size, len(doc))
	}
	stack := []frame{{end: size}}
	deepest, pos := 1, 4
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		if pos == top.end-1 { // the terminating 0x00 of this document
			if doc[pos] != 0 {
				return 0, fmt.Errorf("document at %d lacks its terminator", pos)
			}
			pos++
			stack = stack[:len(stack)-1]
			continue
		}
		if pos >= top.end-1 {
			return 0, fmt.Errorf("element at %d runs past its document", pos)
		}
		typ := doc[pos]
		pos++
		// The key: a C string.
		for pos < top.end && doc[pos] != 0 {
			pos++
		}
		if pos >= top.end {
			return 0, fmt.Errorf("key at %d runs past its document", pos)
		}
		pos++
		n, nested, err := valueSize(typ, doc[pos:top.end])
		if err != nil {
			return 0, fmt.Errorf("element at %d: %w", pos, err)
		}
		if nested {
			stack = append(stack, frame{end: pos + n})
			if len(stack) > deepest {
				deepest = len(stack)
				if deepest > limit {
					return deepest, nil
				}
			}
			pos += 4 // into the embedded document, past its length
			continue
		}
		pos += n
	}
	return deepest, nil
}

// valueSize answers the size of a value of type typ at the start of b, and
// whether it is an embedded document or array (walked into, not skipped).
func valueSize(typ byte, b []byte) (int, bool, error) {
	fixed := map[byte]int{0x01: 8, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0, 0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0x7F: 0, 0xFF: 0, 0x06: 0}
	if n, ok := fixed[typ]; ok {
		if n > len(b) {
			return 0, false, fmt.Errorf("type 0x%02x needs %d bytes", typ, n)
		}
		return n, false, nil
	}
	i32 := func() (int, error) {
		if len(b) < 4 {
			return 0, fmt.Errorf("type 0x%02x: no length", typ)
		}
		return int(int32(binary.LittleEndian.Uint32(b))), nil
	}
	switch typ {
	case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol: int32 length + bytes
		n, err := i32()
		if err != nil || n < 1 || 4+n > len(b) {
			return 0, false, fmt.Errorf("type 0x%02x: bad length", typ)
		}
		return 4 + n, false, nil
	case 0x03, 0x04: // embedded document, array
		n, err := i32()
		if err != nil || n < 5 || n > len(b) {
			return 0, false, fmt.Errorf("type 0x%02x: bad length", typ)
		}
		return n, true, nil
	case 0x05: // binary: int32 length + subtype + bytes
		n, err := i32()
		if err != nil || n < 0 || 5+n > len(b) {
			return 0, false, fmt.Errorf("binary: bad length")
		}
		return 5 + n, false, nil
	case 0x0B: // regex: two C strings
		i, seen := 0, 0
		for ; i < len(b) && seen < 2; i++ {
			if b[i] == 0 {
				seen++
			}
		}
		if seen < 2 {
			return 0, false, fmt.Errorf("regex runs past its document")
		}
		return i, false, nil
	case 0x0C: // DBPointer: string + 12-byte ObjectId
		n, err := i32()
		if err != nil || n < 1 || 4+n+12 > len(b) {
			return 0, false, fmt.Errorf("DBPointer: bad length")
		}
		return 4 + n + 12, false, nil
	case 0x0F: // code with scope: int32 total length (its content is skipped whole)
		n, err := i32()
		if err != nil || n < 14 || n > len(b) {
			return 0, false, fmt.Errorf("code with scope: bad length")
		}
		return n, false, nil
	}
	return 0, false, fmt.Errorf("unknown type 0x%02x", typ)
}

// checkDepth refuses a document nested deeper than MaxDepth, or malformed.
func checkDepth(doc bson.Raw) error {
	d, err := depth(doc, MaxDepth)
	if err != nil {
		return toolrunner.Errorf(toolrunner.KindUpstream, false, "the database answered a malformed document: %v", err)
	}
	if d > MaxDepth {
		return toolrunner.Errorf(toolrunner.KindUpstream, false, "the database answered a document nested deeper than %d levels", MaxDepth)
	}
	return nil
}

// cursor is what docs reads (a *mongo.Cursor).
type cursor interface {
	Next(ctx context.Context) bool
	Err() error
	Close(ctx context.Context) error
}

// rawCursor is a cursor whose current document can be read.
type rawCursor interface {
	cursor
	current() bson.Raw
}

// collect renders at most limit documents of a cursor as relaxed Extended
// JSON, at most maxBytes in all: a server that sends more documents than
// asked, deeper ones than MongoDB allows, or too much in all fails the call.
func collect(ctx context.Context, cur rawCursor, limit int64, maxBytes int) ([]string, error) {
	defer cur.Close(ctx)
	out := []string{}
	total := 0
	for cur.Next(ctx) {
		if int64(len(out)) >= limit {
			return nil, toolrunner.Errorf(toolrunner.KindUpstream, false, "the database answered more than the %d documents asked for", limit)
		}
		doc := cur.current()
		if err := checkDepth(doc); err != nil {
			return nil, err
		}
		s, err := toJSON(doc)
		if err != nil {
			return nil, err
		}
		total += len(s)
		if total > maxBytes {
			return nil, toolrunner.Errorf(toolrunner.KindUpstream, false,
				"the result is larger than %d MiB after %d documents: narrow the filter, project fewer fields or lower limit", maxBytes>>20, len(out))
		}
		out = append(out, s)
	}
	if err := cur.Err(); err != nil {
		return nil, upstream(err, "reading documents")
	}
	return out, nil
}
