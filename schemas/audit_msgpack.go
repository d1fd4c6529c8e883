package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The audit/v1 wire format: a msgpack map keyed by the seed's field names,
// enums as their names, timestamp as a msgpack timestamp (extension -1), UUIDs
// as canonical strings, data as a map; id and created_time are not sent.
// Nullable fields are sent as nil or left out; unknown keys are ignored.

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
	w.mapLen(16)
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

var decPool = sync.Pool{New: func() any {
	r := bytes.NewReader(nil)
	return &pooledDecoder{r: r, dec: msgpack.NewDecoder(r)}
}}

type pooledDecoder struct {
	r   *bytes.Reader
	dec *msgpack.Decoder
}

// UnmarshalAuditEvent decodes an audit/v1 payload and validates it. Errors
// wrap ErrDecode (not the wire shape) or ErrInvalidEvent (shape right, content
// not acceptable). Trailing bytes after the map are an error.
func UnmarshalAuditEvent(b []byte) (AuditEvent, error) {
	var e AuditEvent
	p := decPool.Get().(*pooledDecoder)
	defer decPool.Put(p)
	p.r.Reset(b)
	p.dec.Reset(p.r)
	if err := e.DecodeMsgpack(p.dec); err != nil {
		return AuditEvent{}, err
	}
	if p.r.Len() != 0 {
		return AuditEvent{}, fmt.Errorf("%w: %d trailing bytes", ErrDecode, p.r.Len())
	}
	if err := e.Validate(); err != nil {
		return AuditEvent{}, err
	}
	return e, nil
}

// DecodeMsgpack implements msgpack.CustomDecoder. It does not validate.
func (e *AuditEvent) DecodeMsgpack(dec *msgpack.Decoder) error {
	*e = AuditEvent{}
	n, err := dec.DecodeMapLen()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if n < 0 {
		return fmt.Errorf("%w: payload is nil, want a map", ErrDecode)
	}
	for i := 0; i < n; i++ {
		key, err := dec.DecodeString()
		if err != nil {
			return fmt.Errorf("%w: map key %d: %v", ErrDecode, i, err)
		}
		if err := e.decodeField(dec, key); err != nil {
			return err
		}
	}
	return nil
}

func (e *AuditEvent) decodeField(dec *msgpack.Decoder, key string) error {
	var err error
	switch key {
	case "event_id":
		e.EventID, err = decUUID(dec, key)
	case "organization_id":
		e.OrganizationID, err = decUUID(dec, key)
	case "customer_id":
		e.CustomerID, err = decOptUUID(dec, key)
	case "project_id":
		e.ProjectID, err = decOptUUID(dec, key)
	case "timestamp":
		var c byte
		if c, err = dec.PeekCode(); err != nil {
			return fmt.Errorf("%w: timestamp: %v", ErrDecode, err)
		}
		if c == msgpcode.Nil {
			_ = dec.Skip()
			e.Timestamp = time.Time{}
			return nil
		}
		if !msgpcode.IsExt(c) {
			return fmt.Errorf("%w: timestamp must be a msgpack timestamp", ErrDecode)
		}
		var t time.Time
		if t, err = dec.DecodeTime(); err != nil {
			return fmt.Errorf("%w: timestamp: %v", ErrDecode, err)
		}
		e.Timestamp = t.UTC()
	case "client_ip":
		e.ClientIP, err = decOptStr(dec, key)
	case "display_name":
		e.DisplayName, err = decStr(dec, key)
	case "principal_id":
		e.PrincipalID, err = decStr(dec, key)
	case "principal_type":
		e.PrincipalType, err = decStr(dec, key)
	case "user_id":
		e.UserID, err = decOptStr(dec, key)
	case "resource_id":
		e.ResourceID, err = decOptStr(dec, key)
	case "resource_display":
		e.ResourceDisplay, err = decOptStr(dec, key)
	case "action":
		var s *string
		if s, err = decOptStr(dec, key); err == nil && s != nil {
			e.Action, err = ParseAuditAction(*s)
			err = wrapInvalid(err, key)
		}
	case "source":
		var s *string
		if s, err = decOptStr(dec, key); err == nil && s != nil {
			e.Source, err = ParseAuditSource(*s)
			err = wrapInvalid(err, key)
		}
	case "resource_type":
		var s *string
		if s, err = decOptStr(dec, key); err == nil && s != nil {
			var rt ResourceType
			rt, err = ParseResourceType(*s)
			e.ResourceType, err = &rt, wrapInvalid(err, key)
		}
	case "data":
		e.Data, err = decData(dec)
	default:
		if err = dec.Skip(); err != nil {
			err = fmt.Errorf("%w: value of %q: %v", ErrDecode, key, err)
		}
	}
	return err
}

func wrapInvalid(err error, key string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidEvent, key, err)
}

func decStr(dec *msgpack.Decoder, key string) (string, error) {
	s, err := decOptStr(dec, key)
	if err != nil || s == nil {
		return "", err
	}
	return *s, nil
}

func decOptStr(dec *msgpack.Decoder, key string) (*string, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDecode, key, err)
	}
	if c == msgpcode.Nil {
		_ = dec.Skip()
		return nil, nil
	}
	if !msgpcode.IsString(c) && !msgpcode.IsBin(c) {
		return nil, fmt.Errorf("%w: %s must be a string", ErrDecode, key)
	}
	s, err := dec.DecodeString()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDecode, key, err)
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidEvent, key)
	}
	return &s, nil
}

func decUUID(dec *msgpack.Decoder, key string) (uuid.UUID, error) {
	u, err := decOptUUID(dec, key)
	if err != nil || u == nil {
		return uuid.Nil, err
	}
	return *u, nil
}

func decOptUUID(dec *msgpack.Decoder, key string) (*uuid.UUID, error) {
	s, err := decOptStr(dec, key)
	if err != nil || s == nil {
		return nil, err
	}
	u, err := uuid.Parse(*s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a UUID: %v", ErrInvalidEvent, key, err)
	}
	return &u, nil
}

// maxDataDepth bounds nesting in data, so that a hostile payload cannot
// exhaust the stack.
const maxDataDepth = 32

func decData(dec *msgpack.Decoder) (json.RawMessage, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrDecode, err)
	}
	if c == msgpcode.Nil {
		_ = dec.Skip()
		return nil, nil
	}
	if !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return nil, fmt.Errorf("%w: data must be a map", ErrInvalidEvent)
	}
	v, err := decodeJSONish(dec, 0)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrInvalidEvent, err)
	}
	return b, nil
}

// decodeJSONish decodes a msgpack value into a value that encoding/json can
// represent: maps need string keys, floats must be finite, binary becomes
// base64 through []byte, timestamps become RFC 3339 strings.
func decodeJSONish(dec *msgpack.Decoder, depth int) (any, error) {
	if depth > maxDataDepth {
		return nil, fmt.Errorf("%w: data nested deeper than %d", ErrInvalidEvent, maxDataDepth)
	}
	c, err := dec.PeekCode()
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrDecode, err)
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return nil, fmt.Errorf("%w: data: %v", ErrDecode, err)
		}
		m := make(map[string]any, min(n, 64))
		for i := 0; i < n; i++ {
			k, err := dec.DecodeString()
			if err != nil {
				return nil, fmt.Errorf("%w: data keys must be strings: %v", ErrInvalidEvent, err)
			}
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("%w: data key is not valid UTF-8", ErrInvalidEvent)
			}
			v, err := decodeJSONish(dec, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, fmt.Errorf("%w: data: %v", ErrDecode, err)
		}
		a := make([]any, 0, min(n, 64))
		for i := 0; i < n; i++ {
			v, err := decodeJSONish(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	case msgpcode.IsExt(c):
		t, err := dec.DecodeTime()
		if err != nil {
			return nil, fmt.Errorf("%w: data: unsupported extension: %v", ErrInvalidEvent, err)
		}
		return t.UTC().Format(time.RFC3339Nano), nil
	}
	v, err := dec.DecodeInterfaceLoose()
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrDecode, err)
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: data: non-finite number", ErrInvalidEvent)
		}
	case string:
		if !utf8.ValidString(x) {
			return nil, fmt.Errorf("%w: data: string is not valid UTF-8", ErrInvalidEvent)
		}
	}
	return v, nil
}
