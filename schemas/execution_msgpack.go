package schemas

import (
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// The execution/v1 decoder reads with mpReader, as the audit decoder does:
// every length is checked against the bytes that remain, so a payload of a
// few hundred bytes cannot make ingest allocate more than it holds (msgpack
// v5.4.1's own slice decoding trusts an array header: 40M hook calls
// allocated 12 GiB before reading one). Identifiers are stored in their
// canonical form, whatever form of UUID a producer sent.

// maxHookCalls bounds the hook calls of one execution.
const maxHookCalls = 1000

// DecodeMsgpack implements msgpack.CustomDecoder with the bounded reader. It
// does not validate.
func (e *ExecutionEvent) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	r := mpReader{b: raw}
	return e.decode(&r)
}

func (e *ExecutionEvent) decode(r *mpReader) error {
	*e = ExecutionEvent{}
	return readMap(r, "execution event", func(key []byte) error {
		var err error
		switch string(key) {
		case "event_id":
			e.EventID, err = readCanonicalUUID(r, "event_id")
		case "execution_id":
			e.ExecutionID, err = readCanonicalUUID(r, "execution_id")
		case "organization_id":
			e.OrganizationID, err = readCanonicalUUID(r, "organization_id")
		case "project_id":
			e.ProjectID, err = readCanonicalUUID(r, "project_id")
		case "user_id":
			e.UserID, err = readStr(r, "user_id")
		case "principal_id":
			e.PrincipalID, err = readStr(r, "principal_id")
		case "principal_type":
			e.PrincipalType, err = readStr(r, "principal_type")
		case "display_name":
			e.DisplayName, err = readStr(r, "display_name")
		case "client_ip":
			e.ClientIP, err = readStr(r, "client_ip")
		case "tool":
			err = readMap(r, "tool", func(k []byte) error {
				var err error
				switch string(k) {
				case "toolkit":
					e.Tool.Toolkit, err = readStr(r, "tool.toolkit")
				case "name":
					e.Tool.Name, err = readStr(r, "tool.name")
				case "version":
					e.Tool.Version, err = readStr(r, "tool.version")
				default:
					err = r.skip(1)
				}
				return err
			})
		case "started_at":
			e.StartedAt, err = readTime(r, "started_at")
		case "ended_at":
			e.EndedAt, err = readTime(r, "ended_at")
		case "duration_ms":
			e.DurationMS, err = r.float("duration_ms")
		case "success":
			e.Success, err = r.bool("success")
		case "execution_code":
			e.ExecutionCode, err = readStr(r, "execution_code")
		case "execution_error":
			e.ExecutionError, err = readStr(r, "execution_error")
		case "error_kind":
			e.ErrorKind, err = readStr(r, "error_kind")
		case "hooks":
			e.Hooks, err = readHookCalls(r)
		case "client":
			e.Client, err = readClient(r)
		case "salt":
			e.Salt, err = readSalt(r)
		default:
			err = r.skip(0)
		}
		return err
	})
}

// readClient reads the optional client map (nil for msgpack nil).
func readClient(r *mpReader) (*ClientInfo, error) {
	if c, err := r.peek(); err != nil {
		return nil, err
	} else if c == 0xc0 {
		r.off++
		return nil, nil
	}
	c := &ClientInfo{}
	err := readMap(r, "client", func(k []byte) error {
		var err error
		switch string(k) {
		case "protocol":
			c.Protocol, err = readStr(r, "client.protocol")
		case "name":
			c.Name, err = readStr(r, "client.name")
		case "version":
			c.Version, err = readStr(r, "client.version")
		default:
			err = r.skip(1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func readHookCalls(r *mpReader) ([]HookCall, error) {
	if c, err := r.peek(); err != nil {
		return nil, err
	} else if c == 0xc0 {
		r.off++
		return nil, nil
	}
	n, err := r.arrayLen()
	if err != nil {
		return nil, err
	}
	if n > maxHookCalls {
		return nil, fmt.Errorf("%w: %d hook calls (at most %d)", ErrInvalidEvent, n, maxHookCalls)
	}
	out := make([]HookCall, n) // n ≤ the bytes left: arrayLen checked it
	for i := range out {
		h := &out[i]
		err := readMap(r, "hook call", func(k []byte) error {
			var err error
			switch string(k) {
			case "hook_id":
				h.HookID, err = readStr(r, "hooks.hook_id")
			case "hook_name":
				h.HookName, err = readStr(r, "hooks.hook_name")
			case "point":
				h.Point, err = readStr(r, "hooks.point")
			case "code":
				h.Code, err = readStr(r, "hooks.code")
			case "error_message":
				h.ErrorMessage, err = readStr(r, "hooks.error_message")
			case "http_status":
				h.HTTPStatus, err = r.int("hooks.http_status")
			case "attempts":
				h.Attempts, err = r.int("hooks.attempts")
			case "latency_ms":
				h.LatencyMS, err = r.float("hooks.latency_ms")
			case "failure":
				h.Failure, err = readStr(r, "hooks.failure")
			case "failure_mode_applied":
				h.FailureModeApplied, err = readStr(r, "hooks.failure_mode_applied")
			case "decision":
				h.Decision, err = readStr(r, "hooks.decision")
			case "overridden":
				h.Overridden, err = r.bool("hooks.overridden")
			case "cached":
				h.Cached, err = r.bool("hooks.cached")
			default:
				err = r.skip(1)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readMap reads a map with string keys, calling field for each key with the
// reader at its value (which field must consume).
func readMap(r *mpReader, what string, field func(key []byte) error) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%w: %s is nil, want a map", ErrDecode, what)
	}
	for i := 0; i < n; i++ {
		c, err := r.peek()
		if err != nil {
			return err
		}
		if !isStrCode(c) {
			return fmt.Errorf("%w: %s: map key %d is not a string", ErrDecode, what, i)
		}
		key, err := r.str()
		if err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
	}
	return nil
}

// readCanonicalUUID reads a UUID in any form uuid.Parse accepts (upper
// case, braces, urn:uuid:) and answers its canonical form; "" for null or
// an empty string (Validate decides whether it may be absent).
func readCanonicalUUID(r *mpReader, key string) (string, error) {
	v, ok, err := readStrView(r, key)
	if err != nil || !ok || len(v) == 0 {
		return "", err
	}
	u, err := uuid.ParseBytes(v)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not a UUID", ErrInvalidEvent, key)
	}
	return u.String(), nil
}

// readTime reads a msgpack timestamp (or null: zero).
func readTime(r *mpReader, key string) (time.Time, error) {
	c, err := r.peek()
	if err != nil {
		return time.Time{}, err
	}
	if c == 0xc0 {
		r.off++
		return time.Time{}, nil
	}
	if !isExtCode(c) {
		return time.Time{}, fmt.Errorf("%w: %s must be a msgpack timestamp", ErrDecode, key)
	}
	t, err := r.timestamp()
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %w", ErrDecode, key, err)
	}
	return t, nil
}

// bool reads a boolean (null: false).
func (r *mpReader) bool(key string) (bool, error) {
	c, err := r.peek()
	if err != nil {
		return false, err
	}
	switch c {
	case 0xc0, 0xc2:
		r.off++
		return false, nil
	case 0xc3:
		r.off++
		return true, nil
	}
	return false, fmt.Errorf("%w: %s must be a boolean", ErrDecode, key)
}

// number reads any msgpack number (null: 0).
func (r *mpReader) number(key string) (float64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		r.off++
		return float64(c), nil
	case c >= 0xe0:
		r.off++
		return float64(int8(c)), nil
	case c == 0xc0:
		r.off++
		return 0, nil
	case c == 0xca:
		r.off++
		v, err := r.uintN(4)
		return float64(math.Float32frombits(uint32(v))), err
	case c == 0xcb:
		r.off++
		v, err := r.uintN(8)
		return math.Float64frombits(v), err
	case c >= 0xcc && c <= 0xcf:
		r.off++
		v, err := r.uintN(1 << (c - 0xcc))
		return float64(v), err
	case c >= 0xd0 && c <= 0xd3:
		r.off++
		size := 1 << (c - 0xd0)
		v, err := r.uintN(size)
		if err != nil {
			return 0, err
		}
		shift := 64 - 8*size // sign-extend
		return float64(int64(v<<shift) >> shift), nil
	}
	return 0, fmt.Errorf("%w: %s must be a number", ErrDecode, key)
}

// float reads a finite number.
func (r *mpReader) float(key string) (float64, error) {
	f, err := r.number(key)
	if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return 0, fmt.Errorf("%w: %s is not a finite number", ErrInvalidEvent, key)
	}
	return f, err
}

// int reads an integer that fits an int32 (what every integer field holds).
func (r *mpReader) int(key string) (int, error) {
	f, err := r.number(key)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s is not an integer in range", ErrInvalidEvent, key)
	}
	return int(f), nil
}
