package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// The audit/v1 wire format: a msgpack map keyed by the seed's field names,
// enums as their names, timestamp as a msgpack timestamp (extension -1), UUIDs
// as canonical strings, data as a map; id and created_time are not sent.
// Nullable fields are sent as nil or left out; unknown keys are ignored.
// salt (bin) is sent only when the event has one.

var (
	_ msgpack.CustomEncoder = (*AuditEvent)(nil)
	_ msgpack.CustomDecoder = (*AuditEvent)(nil)
)

var encPool = sync.Pool{New: func() any {
	buf := new(bytes.Buffer)
	enc := msgpack.NewEncoder(buf)
	return &pooledEncoder{buf: buf, enc: enc}
}}

type pooledEncoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// MarshalAuditEvent encodes e in the audit/v1 wire format.
func MarshalAuditEvent(e *AuditEvent) ([]byte, error) {
	p := encPool.Get().(*pooledEncoder)
	defer encPool.Put(p)
	p.buf.Reset()
	if err := e.EncodeMsgpack(p.enc); err != nil {
		return nil, err
	}
	return bytes.Clone(p.buf.Bytes()), nil
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (e *AuditEvent) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := fieldWriter{enc: enc}
	n := 16
	if len(e.Salt) > 0 {
		n++
	}
	w.mapLen(n)
	w.str("event_id", e.EventID.String())
	w.key("timestamp")
	if w.err == nil {
		w.err = enc.EncodeTime(e.Timestamp.UTC())
	}
	w.optStr("client_ip", e.ClientIP)
	w.str("action", e.Action.String())
	w.str("source", e.Source.String())
	w.str("display_name", e.DisplayName)
	w.optUUID("customer_id", e.CustomerID)
	w.str("organization_id", e.OrganizationID.String())
	w.optUUID("project_id", e.ProjectID)
	w.str("principal_id", e.PrincipalID)
	w.optStr("user_id", e.UserID)
	w.str("principal_type", e.PrincipalType)
	if e.ResourceType != nil {
		w.str("resource_type", e.ResourceType.String())
	} else {
		w.null("resource_type")
	}
	w.optStr("resource_id", e.ResourceID)
	w.optStr("resource_display", e.ResourceDisplay)
	w.key("data")
	if w.err == nil {
		w.err = encodeJSONValue(enc, e.Data)
	}
	if len(e.Salt) > 0 {
		w.key("salt")
		if w.err == nil {
			w.err = enc.EncodeBytes(e.Salt)
		}
	}
	return w.err
}

type fieldWriter struct {
	enc *msgpack.Encoder
	err error
}

func (w *fieldWriter) mapLen(n int) {
	if w.err == nil {
		w.err = w.enc.EncodeMapLen(n)
	}
}

func (w *fieldWriter) key(k string) {
	if w.err == nil {
		w.err = w.enc.EncodeString(k)
	}
}

func (w *fieldWriter) str(k, v string) {
	w.key(k)
	if w.err == nil {
		w.err = w.enc.EncodeString(v)
	}
}

func (w *fieldWriter) null(k string) {
	w.key(k)
	if w.err == nil {
		w.err = w.enc.EncodeNil()
	}
}

func (w *fieldWriter) optStr(k string, v *string) {
	if v == nil {
		w.null(k)
		return
	}
	w.str(k, *v)
}

func (w *fieldWriter) optUUID(k string, v *uuid.UUID) {
	if v == nil {
		w.null(k)
		return
	}
	w.str(k, v.String())
}

// encodeJSONValue writes a JSON document (nil for null) as the equivalent msgpack value.
func encodeJSONValue(enc *msgpack.Encoder, raw json.RawMessage) error {
	if len(raw) == 0 {
		return enc.EncodeNil()
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: data is not JSON: %v", ErrInvalidEvent, err)
	}
	return encodeJSONAny(enc, v)
}

func encodeJSONAny(enc *msgpack.Encoder, v any) error {
	switch x := v.(type) {
	case nil:
		return enc.EncodeNil()
	case bool:
		return enc.EncodeBool(x)
	case string:
		return enc.EncodeString(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return enc.EncodeInt(i)
		}
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("%w: number %s: %v", ErrInvalidEvent, x, err)
		}
		return enc.EncodeFloat64(f)
	case []any:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, el := range x {
			if err := encodeJSONAny(enc, el); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		// Sorted keys make the encoding deterministic.
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := encodeJSONAny(enc, x[k]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: unexpected JSON value %T", ErrInvalidEvent, v)
}

// UnmarshalAuditEvent decodes an audit/v1 payload and validates it. Errors
// wrap ErrDecode (not the wire shape) or ErrInvalidEvent (shape right, content
// not acceptable). Trailing bytes after the map are an error.
func UnmarshalAuditEvent(b []byte) (AuditEvent, error) {
	var e AuditEvent
	r := mpReader{b: b}
	if err := e.decode(&r); err != nil {
		return AuditEvent{}, err
	}
	if r.remaining() != 0 {
		return AuditEvent{}, fmt.Errorf("%w: %d trailing bytes", ErrDecode, r.remaining())
	}
	// data came from the transcoder: a JSON object by construction.
	if err := e.validate(false); err != nil {
		return AuditEvent{}, err
	}
	return e, nil
}

// DecodeMsgpack implements msgpack.CustomDecoder. It does not validate.
func (e *AuditEvent) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	r := mpReader{b: raw}
	return e.decode(&r)
}

func (e *AuditEvent) decode(r *mpReader) error {
	*e = AuditEvent{}
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%w: payload is nil, want a map", ErrDecode)
	}
	for i := 0; i < n; i++ {
		c, err := r.peek()
		if err != nil {
			return err
		}
		if !isStrCode(c) {
			return fmt.Errorf("%w: map key %d is not a string", ErrDecode, i)
		}
		key, err := r.str()
		if err != nil {
			return err
		}
		if err := e.decodeField(r, key); err != nil {
			return err
		}
	}
	return nil
}

func (e *AuditEvent) decodeField(r *mpReader, key []byte) error {
	var err error
	switch string(key) {
	case "event_id":
		e.EventID, err = readUUID(r, "event_id")
	case "organization_id":
		e.OrganizationID, err = readUUID(r, "organization_id")
	case "customer_id":
		e.CustomerID, err = readOptUUID(r, "customer_id")
	case "project_id":
		e.ProjectID, err = readOptUUID(r, "project_id")
	case "timestamp":
		var c byte
		if c, err = r.peek(); err != nil {
			return err
		}
		if c == 0xc0 {
			r.off++
			e.Timestamp = time.Time{}
			return nil
		}
		if !isExtCode(c) {
			return fmt.Errorf("%w: timestamp must be a msgpack timestamp", ErrDecode)
		}
		if e.Timestamp, err = r.timestamp(); err != nil {
			return fmt.Errorf("%w: timestamp: %w", ErrDecode, err)
		}
	case "client_ip":
		e.ClientIP, err = readOptStr(r, "client_ip")
	case "display_name":
		e.DisplayName, err = readStr(r, "display_name")
	case "principal_id":
		e.PrincipalID, err = readStr(r, "principal_id")
	case "principal_type":
		e.PrincipalType, err = readStr(r, "principal_type")
	case "user_id":
		e.UserID, err = readOptStr(r, "user_id")
	case "resource_id":
		e.ResourceID, err = readOptStr(r, "resource_id")
	case "resource_display":
		e.ResourceDisplay, err = readOptStr(r, "resource_display")
	case "action":
		var v []byte
		if v, err = readEnumName(r, "action"); err == nil && v != nil {
			var x uint8
			x, err = enumParseBytes(auditActionNames, v, "action")
			e.Action = AuditAction(x)
		}
	case "source":
		var v []byte
		if v, err = readEnumName(r, "source"); err == nil && v != nil {
			var x uint8
			x, err = enumParseBytes(auditSourceNames, v, "source")
			e.Source = AuditSource(x)
		}
	case "resource_type":
		var v []byte
		if v, err = readEnumName(r, "resource_type"); err == nil && v != nil {
			var x uint8
			x, err = enumParseBytes(resourceTypeNames, v, "resource_type")
			rt := ResourceType(x)
			e.ResourceType = &rt
		}
	case "data":
		var c byte
		if c, err = r.peek(); err != nil {
			return err
		}
		switch {
		case c == 0xc0:
			r.off++
			e.Data = nil
		case (c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf:
			var b []byte
			if b, err = r.appendJSON(make([]byte, 0, 128), 0); err == nil {
				e.Data = b
			}
		default:
			return fmt.Errorf("%w: data must be a map", ErrInvalidEvent)
		}
	case "salt":
		e.Salt, err = readSalt(r)
	default:
		err = r.skip(0)
	}
	return err
}

func enumParseBytes(names []string, v []byte, key string) (uint8, error) {
	for i, n := range names {
		if n == string(v) {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %s: %w %q", ErrInvalidEvent, key, ErrUnknownEnum, v)
}

// readStrView reads a nullable string as a view (nil for null).
func readStrView(r *mpReader, key string) ([]byte, bool, error) {
	c, err := r.peek()
	if err != nil {
		return nil, false, err
	}
	if c == 0xc0 {
		r.off++
		return nil, false, nil
	}
	if !isStrCode(c) && !isBinCode(c) {
		return nil, false, fmt.Errorf("%w: %s must be a string", ErrDecode, key)
	}
	v, err := r.str()
	if err != nil {
		return nil, false, err
	}
	if !utf8.Valid(v) {
		return nil, false, fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidEvent, key)
	}
	return v, true, nil
}

func readEnumName(r *mpReader, key string) ([]byte, error) {
	v, ok, err := readStrView(r, key)
	if err != nil || !ok {
		return nil, err
	}
	return v, nil
}

func readStr(r *mpReader, key string) (string, error) {
	v, _, err := readStrView(r, key)
	return string(v), err
}

func readOptStr(r *mpReader, key string) (*string, error) {
	v, ok, err := readStrView(r, key)
	if err != nil || !ok {
		return nil, err
	}
	s := string(v)
	return &s, nil
}

func readUUID(r *mpReader, key string) (uuid.UUID, error) {
	u, err := readOptUUID(r, key)
	if err != nil || u == nil {
		return uuid.Nil, err
	}
	return *u, nil
}

func readOptUUID(r *mpReader, key string) (*uuid.UUID, error) {
	v, ok, err := readStrView(r, key)
	if err != nil || !ok {
		return nil, err
	}
	u, err := uuid.ParseBytes(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a UUID: %v", ErrInvalidEvent, key, err)
	}
	return &u, nil
}

// maxDataDepth bounds nesting in data, so that a hostile payload cannot
// exhaust the stack.
const maxDataDepth = 32

const hexDigits = "0123456789abcdef"

// appendJSONString appends s (valid UTF-8) as a JSON string.
func appendJSONString(b []byte, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
