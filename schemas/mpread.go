package schemas

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// mpReader reads msgpack from a byte slice without allocating: strings are
// returned as views of the input. It is the hot path of ingest; every error
// wraps ErrDecode or ErrInvalidEvent.
type mpReader struct {
	b   []byte
	off int
}

func (r *mpReader) remaining() int { return len(r.b) - r.off }

func (r *mpReader) errf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrDecode, r.off, fmt.Sprintf(format, args...))
}

func (r *mpReader) peek() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.errf("unexpected end of input")
	}
	return r.b[r.off], nil
}

func (r *mpReader) next(n int) ([]byte, error) {
	if n < 0 || n > r.remaining() {
		return nil, r.errf("length %d exceeds the %d bytes left", n, r.remaining())
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v, nil
}

func (r *mpReader) uintN(size int) (uint64, error) {
	v, err := r.next(size)
	if err != nil {
		return 0, err
	}
	switch size {
	case 1:
		return uint64(v[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(v)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(v)), nil
	}
	return binary.BigEndian.Uint64(v), nil
}

// length reads a length of size bytes and checks that at least min*n bytes follow.
func (r *mpReader) length(size, minEach int) (int, error) {
	n, err := r.uintN(size)
	if err != nil {
		return 0, err
	}
	if n > uint64(r.remaining()/max(minEach, 1)) && minEach > 0 {
		return 0, r.errf("length %d exceeds the input", n)
	}
	if minEach == 0 && n > uint64(r.remaining()) {
		return 0, r.errf("length %d exceeds the input", n)
	}
	return int(n), nil
}

func (r *mpReader) mapLen() (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case c >= 0x80 && c <= 0x8f:
		r.off++
		n := int(c & 0x0f)
		if 2*n > r.remaining() {
			return 0, r.errf("map of %d entries exceeds the input", n)
		}
		return n, nil
	case c == 0xde || c == 0xdf:
		r.off++
		size := 2
		if c == 0xdf {
			size = 4
		}
		return r.length(size, 2)
	case c == 0xc0:
		return -1, nil
	}
	return 0, r.errf("want a map, found code 0x%02x", c)
}

func (r *mpReader) arrayLen() (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case c >= 0x90 && c <= 0x9f:
		r.off++
		n := int(c & 0x0f)
		if n > r.remaining() {
			return 0, r.errf("array of %d elements exceeds the input", n)
		}
		return n, nil
	case c == 0xdc || c == 0xdd:
		r.off++
		size := 2
		if c == 0xdd {
			size = 4
		}
		return r.length(size, 1)
	}
	return 0, r.errf("want an array, found code 0x%02x", c)
}

func isStrCode(c byte) bool { return (c >= 0xa0 && c <= 0xbf) || (c >= 0xd9 && c <= 0xdb) }
func isBinCode(c byte) bool { return c >= 0xc4 && c <= 0xc6 }

// str reads a str (or bin) and returns a view of its bytes.
func (r *mpReader) str() ([]byte, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		r.off++
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		r.off++
		n, err = r.length(1, 0)
	case c == 0xda || c == 0xc5:
		r.off++
		n, err = r.length(2, 0)
	case c == 0xdb || c == 0xc6:
		r.off++
		n, err = r.length(4, 0)
	default:
		return nil, r.errf("want a string, found code 0x%02x", c)
	}
	if err != nil {
		return nil, err
	}
	return r.next(n)
}

// ext reads an extension header and returns its type and data.
func (r *mpReader) ext() (int8, []byte, error) {
	c, err := r.peek()
	if err != nil {
		return 0, nil, err
	}
	r.off++
	var n int
	switch c {
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		n = 1 << (c - 0xd4)
	case 0xc7:
		n, err = r.length(1, 0)
	case 0xc8:
		n, err = r.length(2, 0)
	case 0xc9:
		n, err = r.length(4, 0)
	default:
		r.off--
		return 0, nil, r.errf("want an extension, found code 0x%02x", c)
	}
	if err != nil {
		return 0, nil, err
	}
	typ, err := r.next(1)
	if err != nil {
		return 0, nil, err
	}
	data, err := r.next(n)
	return int8(typ[0]), data, err
}

func isExtCode(c byte) bool { return (c >= 0xd4 && c <= 0xd8) || (c >= 0xc7 && c <= 0xc9) }

// timestamp reads a msgpack timestamp (extension -1, 4, 8 or 12 bytes).
func (r *mpReader) timestamp() (time.Time, error) {
	typ, d, err := r.ext()
	if err != nil {
		return time.Time{}, err
	}
	if typ != -1 {
		return time.Time{}, r.errf("extension %d is not a timestamp", typ)
	}
	switch len(d) {
	case 4:
		return time.Unix(int64(binary.BigEndian.Uint32(d)), 0).UTC(), nil
	case 8:
		v := binary.BigEndian.Uint64(d)
		nsec := int64(v >> 34)
		if nsec > 999_999_999 {
			return time.Time{}, r.errf("timestamp nanoseconds out of range")
		}
		return time.Unix(int64(v&0x3ffffffff), nsec).UTC(), nil
	case 12:
		nsec := int64(binary.BigEndian.Uint32(d[:4]))
		if nsec > 999_999_999 {
			return time.Time{}, r.errf("timestamp nanoseconds out of range")
		}
		return time.Unix(int64(binary.BigEndian.Uint64(d[4:])), nsec).UTC(), nil
	}
	return time.Time{}, r.errf("timestamp of %d bytes", len(d))
}

// skip skips one value of any type.
func (r *mpReader) skip(depth int) error {
	if depth > maxDataDepth {
		return fmt.Errorf("%w: value nested deeper than %d", ErrInvalidEvent, maxDataDepth)
	}
	c, err := r.peek()
	if err != nil {
		return err
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		r.off++
		return nil
	case c >= 0x80 && c <= 0x8f, c == 0xde, c == 0xdf:
		n, err := r.mapLen()
		if err != nil {
			return err
		}
		for i := 0; i < 2*n; i++ {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case c >= 0x90 && c <= 0x9f, c == 0xdc, c == 0xdd:
		n, err := r.arrayLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case isStrCode(c) || isBinCode(c):
		_, err := r.str()
		return err
	case isExtCode(c):
		_, _, err := r.ext()
		return err
	case c == 0xca:
		_, err := r.next(5)
		return err
	case c == 0xcb:
		_, err := r.next(9)
		return err
	case c >= 0xcc && c <= 0xcf:
		_, err := r.next(1 + (1 << (c - 0xcc)))
		return err
	case c >= 0xd0 && c <= 0xd3:
		_, err := r.next(1 + (1 << (c - 0xd0)))
		return err
	}
	return r.errf("invalid code 0x%02x", c)
}

// appendJSON transcodes the next value into JSON. Maps need string keys,
// strings must be UTF-8, floats finite; binary becomes a base64 string and a
// timestamp an RFC 3339 string.
func (r *mpReader) appendJSON(b []byte, depth int) ([]byte, error) {
	if depth > maxDataDepth {
		return nil, fmt.Errorf("%w: data nested deeper than %d", ErrInvalidEvent, maxDataDepth)
	}
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	switch {
	case c <= 0x7f:
		r.off++
		return strconv.AppendInt(b, int64(c), 10), nil
	case c >= 0xe0:
		r.off++
		return strconv.AppendInt(b, int64(int8(c)), 10), nil
	case c == 0xc0:
		r.off++
		return append(b, "null"...), nil
	case c == 0xc2:
		r.off++
		return append(b, "false"...), nil
	case c == 0xc3:
		r.off++
		return append(b, "true"...), nil
	case c >= 0x80 && c <= 0x8f, c == 0xde, c == 0xdf:
		n, err := r.mapLen()
		if err != nil {
			return nil, err
		}
		b = append(b, '{')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			kc, err := r.peek()
			if err != nil {
				return nil, err
			}
			if !isStrCode(kc) {
				return nil, fmt.Errorf("%w: data keys must be strings", ErrInvalidEvent)
			}
			k, err := r.str()
			if err != nil {
				return nil, err
			}
			if !utf8.Valid(k) {
				return nil, fmt.Errorf("%w: data key is not valid UTF-8", ErrInvalidEvent)
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			if b, err = r.appendJSON(b, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case c >= 0x90 && c <= 0x9f, c == 0xdc, c == 0xdd:
		n, err := r.arrayLen()
		if err != nil {
			return nil, err
		}
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = r.appendJSON(b, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case isStrCode(c):
		s, err := r.str()
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(s) {
			return nil, fmt.Errorf("%w: data: string is not valid UTF-8", ErrInvalidEvent)
		}
		return appendJSONString(b, s), nil
	case isBinCode(c):
		v, err := r.str()
		if err != nil {
			return nil, err
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, '"'), nil
	case c == 0xca || c == 0xcb:
		r.off++
		var f float64
		bits := 32
		if c == 0xca {
			v, err := r.uintN(4)
			if err != nil {
				return nil, err
			}
			f = float64(math.Float32frombits(uint32(v)))
		} else {
			v, err := r.uintN(8)
			if err != nil {
				return nil, err
			}
			f, bits = math.Float64frombits(v), 64
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%w: data: non-finite number", ErrInvalidEvent)
		}
		return strconv.AppendFloat(b, f, 'g', -1, bits), nil
	case c >= 0xcc && c <= 0xcf:
		r.off++
		v, err := r.uintN(1 << (c - 0xcc))
		if err != nil {
			return nil, err
		}
		return strconv.AppendUint(b, v, 10), nil
	case c >= 0xd0 && c <= 0xd3:
		r.off++
		size := 1 << (c - 0xd0)
		v, err := r.uintN(size)
		if err != nil {
			return nil, err
		}
		var i int64
		switch size {
		case 1:
			i = int64(int8(v))
		case 2:
			i = int64(int16(v))
		case 4:
			i = int64(int32(v))
		default:
			i = int64(v)
		}
		return strconv.AppendInt(b, i, 10), nil
	case isExtCode(c):
		t, err := r.timestamp()
		if err != nil {
			return nil, fmt.Errorf("%w: data: unsupported extension: %v", ErrInvalidEvent, err)
		}
		b = append(b, '"')
		b = t.AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), nil
	}
	return nil, r.errf("invalid code 0x%02x", c)
}
