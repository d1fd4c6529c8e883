package tlog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"
)

// Kind is one of the two logs of an organization.
type Kind uint8

// The logs of an organization: audit entries and tool executions.
const (
	KindAudit      Kind = 0
	KindExecutions Kind = 1
)

// String is the kind's route segment: audit_logs or tool_executions.
func (k Kind) String() string {
	switch k {
	case KindAudit:
		return "audit_logs"
	case KindExecutions:
		return "tool_executions"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Origin is the origin line of the checkpoints of org's log of kind:
// <prefix>/orgs/<org_id>/audit_logs or …/tool_executions. prefix (a
// configuration value, e.g. the deployment's host name) names the
// deployment; it must be printable ASCII without spaces or '+'.
func Origin(prefix string, org uuid.UUID, kind Kind) string {
	return strings.TrimSuffix(prefix, "/") + "/orgs/" + org.String() + "/" + kind.String()
}

// ParseOrigin is the inverse of Origin; ok is false for an origin that
// Origin does not make.
func ParseOrigin(origin string) (prefix string, org uuid.UUID, kind Kind, ok bool) {
	rest, k, found := cutLast(origin)
	if !found {
		return "", uuid.Nil, 0, false
	}
	switch k {
	case KindAudit.String():
		kind = KindAudit
	case KindExecutions.String():
		kind = KindExecutions
	default:
		return "", uuid.Nil, 0, false
	}
	rest, id, found := cutLast(rest)
	if !found {
		return "", uuid.Nil, 0, false
	}
	org, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", uuid.Nil, 0, false
	}
	prefix, orgs, found := cutLast(rest)
	if !found || orgs != "orgs" || prefix == "" {
		return "", uuid.Nil, 0, false
	}
	return prefix, org, kind, true
}

func cutLast(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// Checkpoint is a signed tree head of one log.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   Hash
	// Time is when the log signed it (millisecond precision, UTC).
	Time time.Time
	// SealedUntil (zero: not said) is the persistence time up to which
	// the log is complete at this size: every entry of the organization's
	// kind whose created_time is at or before it is at a leaf below Size
	// (millisecond precision, UTC; never after Time).
	SealedUntil time.Time
}

// TimestampExtension starts the first extension line of a checkpoint
// body: "timestamp " and the time in TimeFormat; SealedExtension the
// optional second: "sealed_until " and the time in TimeFormat.
const (
	TimestampExtension = "timestamp "
	SealedExtension    = "sealed_until "
)

// MaxCheckpointBytes bounds a signed checkpoint that Open reads.
const MaxCheckpointBytes = 16 << 10

// Body is the checkpoint's C2SP tlog-checkpoint note text:
//
//	<origin>
//	<size, decimal>
//	<root, standard base64>
//	timestamp <time, RFC 3339 UTC with milliseconds>
//	sealed_until <time, the same format> (when SealedUntil is set)
func (cp Checkpoint) Body() []byte {
	var b bytes.Buffer
	b.WriteString(cp.Origin)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(cp.Size, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(cp.Root[:]))
	b.WriteByte('\n')
	b.WriteString(TimestampExtension)
	b.WriteString(cp.Time.UTC().Format(TimeFormat))
	b.WriteByte('\n')
	if !cp.SealedUntil.IsZero() {
		b.WriteString(SealedExtension)
		b.WriteString(cp.SealedUntil.UTC().Format(TimeFormat))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func (cp Checkpoint) check() error {
	switch {
	case !validName(cp.Origin):
		return fmt.Errorf("%w: origin %q is empty, too long, or has a space, a '+' or a non-ASCII character", ErrMalformedCheckpoint, cp.Origin)
	case cp.Size < 0:
		return fmt.Errorf("%w: negative size", ErrMalformedCheckpoint)
	case cp.Time.IsZero():
		return fmt.Errorf("%w: no time", ErrMalformedCheckpoint)
	case cp.SealedUntil.After(cp.Time):
		return fmt.Errorf("%w: sealed_until %s after the checkpoint's time %s", ErrMalformedCheckpoint, cp.SealedUntil.Format(TimeFormat), cp.Time.Format(TimeFormat))
	}
	return nil
}

// Sign returns cp as a C2SP signed note signed by key. The time is kept to
// the millisecond.
func Sign(cp Checkpoint, key PrivateKey) ([]byte, error) {
	if key.signer == nil {
		return nil, fmt.Errorf("%w: no private key", ErrMalformedKey)
	}
	cp.Time = cp.Time.UTC().Truncate(time.Millisecond)
	if !cp.SealedUntil.IsZero() {
		cp.SealedUntil = cp.SealedUntil.UTC().Truncate(time.Millisecond)
	}
	if err := cp.check(); err != nil {
		return nil, err
	}
	msg, err := note.Sign(&note.Note{Text: string(cp.Body())}, key.signer)
	if err != nil {
		return nil, fmt.Errorf("tlog: sign checkpoint: %w", err)
	}
	return msg, nil
}

// Open verifies a signed checkpoint against keys and parses its body. It
// refuses: an input over MaxCheckpointBytes; a note without a signature by
// a key of keys (ErrUnknownKey, naming the key_id of each signature); a
// signature by a known key that does not verify (ErrBadSignature); a body
// other than exactly the lines Body writes (ErrMalformedCheckpoint);
// a checkpoint whose time is outside the validity of every known key that
// signed it (ErrKeyNotValid). It returns the key that verified.
func Open(msg []byte, keys KeySet) (Checkpoint, PublicKey, error) {
	if len(msg) > MaxCheckpointBytes {
		return Checkpoint{}, PublicKey{}, fmt.Errorf("%w: checkpoint of %d bytes (at most %d)", ErrTooLarge, len(msg), MaxCheckpointBytes)
	}
	n, err := note.Open(msg, keys)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			var ids []string
			for _, s := range unverified.Note.UnverifiedSigs {
				ids = append(ids, KeyID(s.Hash)+" ("+strconv.Quote(s.Name)+")")
			}
			return Checkpoint{}, PublicKey{}, fmt.Errorf("%w %s", ErrUnknownKey, strings.Join(ids, ", "))
		case errors.As(err, &invalid):
			return Checkpoint{}, PublicKey{}, fmt.Errorf("%w by key %s (%q)", ErrBadSignature, KeyID(invalid.Hash), invalid.Name)
		}
		return Checkpoint{}, PublicKey{}, fmt.Errorf("%w: not a signed note: %w", ErrMalformedCheckpoint, err)
	}
	cp, err := parseBody(n.Text)
	if err != nil {
		return Checkpoint{}, PublicKey{}, err
	}
	var outside []string
	for _, s := range n.Sigs {
		k := keys.verif[nameHash{s.Name, s.Hash}].key
		if k.ValidAt(cp.Time) {
			return cp, k, nil
		}
		window := "from " + k.NotBefore.UTC().Format(TimeFormat)
		if k.NotAfter != nil {
			window += " until " + k.NotAfter.UTC().Format(TimeFormat)
		}
		outside = append(outside, fmt.Sprintf("key %s (%q, valid %s)", k.KeyID, k.Name, window))
	}
	return Checkpoint{}, PublicKey{}, fmt.Errorf("%w: the checkpoint of %s is signed by %s", ErrKeyNotValid, cp.Time.Format(TimeFormat), strings.Join(outside, ", "))
}

// parseBody reads a body as Body writes it, and nothing else.
func parseBody(text string) (Checkpoint, error) {
	bad := func(format string, args ...any) (Checkpoint, error) {
		return Checkpoint{}, fmt.Errorf("%w: %s", ErrMalformedCheckpoint, fmt.Sprintf(format, args...))
	}
	if !strings.HasSuffix(text, "\n") {
		return bad("body does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 4 && len(lines) != 5 {
		return bad("%d lines (want origin, size, root hash, the timestamp line and the optional sealed_until line)", len(lines))
	}
	var cp Checkpoint
	cp.Origin = lines[0]
	if !validName(cp.Origin) {
		return bad("origin %.80q", cp.Origin)
	}
	s := lines[1]
	if s == "" || len(s) > 19 || s[0] == '0' && s != "0" || strings.Trim(s, "0123456789") != "" {
		return bad("size %.40q is not a decimal number without leading zeros", s)
	}
	size, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return bad("size %.40q out of range", s)
	}
	cp.Size = size
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != len(cp.Root) {
		return bad("root hash %.80q is not the base64 of 32 bytes", lines[2])
	}
	copy(cp.Root[:], root)
	ts, ok := strings.CutPrefix(lines[3], TimestampExtension)
	if !ok {
		return bad("line 4 %.80q is not the timestamp line", lines[3])
	}
	t, err := time.Parse(TimeFormat, ts)
	if err != nil || t.Format(TimeFormat) != ts {
		return bad("timestamp %.40q is not in %s", ts, TimeFormat)
	}
	cp.Time = t
	if len(lines) == 5 {
		ts, ok := strings.CutPrefix(lines[4], SealedExtension)
		if !ok {
			return bad("line 5 %.80q is not the sealed_until line", lines[4])
		}
		t, err := time.Parse(TimeFormat, ts)
		if err != nil || t.Format(TimeFormat) != ts {
			return bad("sealed_until %.40q is not in %s", ts, TimeFormat)
		}
		if t.After(cp.Time) {
			return bad("sealed_until %s is after the checkpoint's time", ts)
		}
		cp.SealedUntil = t
	}
	return cp, nil
}

// NoteOf returns the signed checkpoint held in b: b itself when it is the
// note, or the note inside a JSON object holding one (the answer of the
// checkpoint route, {"data":{"note":…}}, or an export's last line,
// {"checkpoint":…}). Anything else is returned as it is, for Open to
// refuse.
func NoteOf(b []byte) []byte {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return b
	}
	var v struct {
		Checkpoint *string `json:"checkpoint"`
		Data       *struct {
			Note *string `json:"note"`
		} `json:"data"`
	}
	if json.Unmarshal(t, &v) != nil {
		return b
	}
	switch {
	case v.Checkpoint != nil:
		return []byte(*v.Checkpoint)
	case v.Data != nil && v.Data.Note != nil:
		return []byte(*v.Data.Note)
	}
	return b
}
