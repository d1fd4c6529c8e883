package tlog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Witness cosignatures (C2SP tlog-cosignature): a witness that has checked
// that a checkpoint extends the last one it saw of the log signs
//
//	cosignature/v1
//	time <T, decimal seconds since the Unix epoch>
//	<the checkpoint's note text>
//
// with Ed25519, and answers a signature line whose signature bytes are the
// key hash (4 bytes), T (8 bytes, big endian) and the Ed25519 signature (64
// bytes). A witness's verifier key (vkey) is a signed-note key with the
// algorithm byte 0x04: name+hash+base64(0x04 ‖ public key), where hash is
// the first 4 bytes of SHA-256(name ‖ "\n" ‖ 0x04 ‖ public key) as 8 hex
// digits.

// algCosignatureV1 is the signed-note algorithm byte of cosignature/v1 keys.
const algCosignatureV1 = 0x04

// cosignatureSize is the length of a cosignature's bytes after its key
// hash: the timestamp and the Ed25519 signature.
const cosignatureSize = 8 + ed25519.SignatureSize

// WitnessKey is a witness's cosigning key.
type WitnessKey struct {
	Name string
	Hash uint32
	Pub  ed25519.PublicKey
}

// KeyID is the key hash as 8 lowercase hex digits (as PublicKey.KeyID).
func (k WitnessKey) KeyID() string { return KeyID(k.Hash) }

// String is the key's vkey.
func (k WitnessKey) String() string {
	return k.Name + "+" + k.KeyID() + "+" + base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, k.Pub...))
}

// noteKeyHash is the signed-note key hash of a key of algorithm alg.
func noteKeyHash(name string, alg byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', alg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// ParseWitnessKey parses a witness's vkey (name+hash+base64 of 0x04 and the
// 32-byte Ed25519 public key). It refuses another algorithm, a hash that
// is not the key's, and a name with a space or a '+'.
func ParseWitnessKey(vkey string) (WitnessKey, error) {
	bad := func(why string) (WitnessKey, error) {
		return WitnessKey{}, fmt.Errorf("%w: witness key %.120q: %s", ErrMalformedKey, vkey, why)
	}
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 {
		return bad("not name+hash+key")
	}
	if !validName(name) {
		return bad("the name is empty or has a space, a '+' or a non-ASCII character")
	}
	h, err := strconv.ParseUint(hash, 16, 32)
	if err != nil || len(hash) != 8 {
		return bad("the key hash is not 8 hex digits")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize {
		return bad("the key is not the base64 of an algorithm byte and 32 bytes")
	}
	if raw[0] != algCosignatureV1 {
		return bad(fmt.Sprintf("algorithm 0x%02x is not a witness cosignature key (0x04, cosignature/v1)", raw[0]))
	}
	if got := noteKeyHash(name, raw[0], raw[1:]); got != uint32(h) {
		return bad("the key hash does not match the key (it is " + KeyID(got) + ")")
	}
	return WitnessKey{Name: name, Hash: uint32(h), Pub: ed25519.PublicKey(slices.Clone(raw[1:]))}, nil
}

// CosignatureMessage is what a witness signs for the note text at time t.
func CosignatureMessage(text []byte, t uint64) []byte {
	m := make([]byte, 0, len(text)+48)
	m = append(m, "cosignature/v1\ntime "...)
	m = strconv.AppendUint(m, t, 10)
	m = append(m, '\n')
	return append(m, text...)
}

// Cosignature is a witness's cosignature found valid on a note.
type Cosignature struct {
	Witness WitnessKey
	// Time is when the witness cosigned (its clock, in seconds).
	Time time.Time
	// Line is the signature line ("— name base64\n").
	Line string
}

// sigPrefix starts every signature line of a signed note.
const sigPrefix = "\u2014 "

// SplitNote splits a signed note into its text (ending with a newline)
// and its signature lines (each without its newline).
func SplitNote(msg []byte) (text []byte, lines []string, err error) {
	if len(msg) > MaxCheckpointBytes {
		return nil, nil, fmt.Errorf("%w: note of %d bytes (at most %d)", ErrTooLarge, len(msg), MaxCheckpointBytes)
	}
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: no signature block", ErrMalformedCheckpoint)
	}
	text, sigs := msg[:i+1], msg[i+2:]
	if len(sigs) == 0 || sigs[len(sigs)-1] != '\n' {
		return nil, nil, fmt.Errorf("%w: the signature block does not end with a newline", ErrMalformedCheckpoint)
	}
	for _, l := range strings.Split(string(sigs[:len(sigs)-1]), "\n") {
		if !strings.HasPrefix(l, sigPrefix) {
			return nil, nil, fmt.Errorf("%w: a signature line does not start with \"— \"", ErrMalformedCheckpoint)
		}
		lines = append(lines, l)
	}
	return text, lines, nil
}

// parseSigLine reads a signature line: its name, key hash and the
// signature bytes after the hash.
func parseSigLine(line string) (name string, hash uint32, sig []byte, ok bool) {
	name, b64, found := strings.Cut(strings.TrimPrefix(line, sigPrefix), " ")
	if !found || name == "" {
		return "", 0, nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(b) < 4 {
		return "", 0, nil, false
	}
	return name, binary.BigEndian.Uint32(b), b[4:], true
}

// CosignatureProblem is a signature line by a listed witness's key that
// does not verify: the note's text was altered or the cosignature forged.
type CosignatureProblem struct {
	Witness WitnessKey
}

func (p CosignatureProblem) Error() string {
	return fmt.Sprintf("the cosignature of witness %s (key %s) does not verify: forged, or the checkpoint was altered", p.Witness.Name, p.Witness.KeyID())
}

// Unwrap makes a problem an ErrBadSignature.
func (CosignatureProblem) Unwrap() error { return ErrBadSignature }

// Cosignatures returns the valid cosignatures on the signed note msg by
// the witnesses listed (one per witness: the first valid line of each), in
// the order of witnesses, and a problem for each line by a listed witness
// that does not verify. Lines of other keys are ignored.
func Cosignatures(msg []byte, witnesses []WitnessKey) ([]Cosignature, []CosignatureProblem, error) {
	text, lines, err := SplitNote(msg)
	if err != nil {
		return nil, nil, err
	}
	found := make([]*Cosignature, len(witnesses))
	var problems []CosignatureProblem
	for _, l := range lines {
		name, hash, sig, ok := parseSigLine(l)
		if !ok {
			continue
		}
		for wi, w := range witnesses {
			if w.Name != name || w.Hash != hash {
				continue
			}
			t, valid := verifyCosignature(w, text, sig)
			if !valid {
				problems = append(problems, CosignatureProblem{Witness: w})
				break
			}
			if found[wi] == nil {
				found[wi] = &Cosignature{Witness: w, Time: t, Line: l + "\n"}
			}
			break
		}
	}
	var out []Cosignature
	for _, c := range found {
		if c != nil {
			out = append(out, *c)
		}
	}
	return out, problems, nil
}

// verifyCosignature checks sig (the bytes after the key hash) over text.
func verifyCosignature(w WitnessKey, text, sig []byte) (time.Time, bool) {
	if len(sig) != cosignatureSize {
		return time.Time{}, false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > 1<<62 || !ed25519.Verify(w.Pub, CosignatureMessage(text, t), sig[8:]) {
		return time.Time{}, false
	}
	return time.Unix(int64(t), 0).UTC(), true
}

// WithCosignatures returns the signed note msg with the signature lines of
// cosigs added after its own, leaving out a line by a key that has signed
// the note already (the first cosignature of a witness stays).
func WithCosignatures(msg []byte, cosigs []Cosignature) ([]byte, error) {
	_, lines, err := SplitNote(msg)
	if err != nil {
		return nil, err
	}
	type nh struct {
		name string
		hash uint32
	}
	have := map[nh]bool{}
	for _, l := range lines {
		if name, hash, _, ok := parseSigLine(l); ok {
			have[nh{name, hash}] = true
		}
	}
	out := slices.Clip(msg)
	for _, c := range cosigs {
		k := nh{c.Witness.Name, c.Witness.Hash}
		if have[k] {
			continue
		}
		have[k] = true
		out = append(out, c.Line...)
	}
	return out, nil
}

// OwnSignatures returns msg with only the signature lines of key (the
// log's own signature, as a witness is sent the note): cosignatures are
// left out.
func OwnSignatures(msg []byte, key PublicKey) ([]byte, error) {
	text, lines, err := SplitNote(msg)
	if err != nil {
		return nil, err
	}
	id, err := strconv.ParseUint(key.KeyID, 16, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: key_id %q", ErrMalformedKey, key.KeyID)
	}
	out := append(slices.Clip(text), '\n')
	kept := 0
	for _, l := range lines {
		if name, hash, _, ok := parseSigLine(l); ok && name == key.Name && hash == uint32(id) {
			out = append(out, l...)
			out = append(out, '\n')
			kept++
		}
	}
	if kept == 0 {
		return nil, fmt.Errorf("%w: the note carries no signature by key %s", ErrUnknownKey, key.KeyID)
	}
	return out, nil
}
