package tlog

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"sync"
	"unicode/utf8"
)

// SaltedLeaf computes the version 2 leaf of an entry with a salt straight
// from its covered members, without the served JSON: the hash that
// ParseEntry computes from the entry as a route serves it (json.Marshal of
// the item), byte for byte, at a fraction of the cost (ingest computes one
// per entry it stores). The caller adds each covered member once, by
// name, with its value as the item holds it (String, StringOrNull) or as
// JSON (JSON: canonicalized here); members that no leaf covers are
// ignored. A SaltedLeaf is reused: NewSaltedLeaf takes one from a pool and
// Free returns it.
type SaltedLeaf struct {
	// prefix is "auditrail field key v2" ‖ 0x00 ‖ salt ‖ 0x00, the start
	// of every field key's preimage, followed by room for the field name.
	prefix [len(fieldKeyDomain) + 1 + SaltBytes + 1 + 32]byte
	vals   []byte        // the members' canonical values, one after another
	ms     []leafMember  // the members added, by name once Leaf sorts them
	data   []dataSpan    // the members of data (an object), in JCS order, in vals
	out    []byte        // the leaf's canonical bytes
	comm   []byte        // the commitments object
	c      canonicalizer // for JSON values
	h      hash.Hash     // SHA-256, reused
	sum    [32]byte
	small  [128]byte // K ‖ v of a short value
	err    error
}

// fieldKeyDomain starts the preimage of every field key (FieldKey).
const fieldKeyDomain = "auditrail field key v2"

type leafMember struct {
	name   string
	lo, hi int // value in vals
}

// dataSpan is a member of data in vals: its quoted name at [key, colon)
// and its value at [colon+1, end).
type dataSpan struct{ key, colon, end int }

var saltedLeaves = sync.Pool{New: func() any { return &SaltedLeaf{h: sha256.New()} }}

// NewSaltedLeaf starts the leaf of an entry with this salt (SaltBytes
// bytes; another length is ErrNotCanonicalizable, as a served salt that
// is not the base64 of SaltBytes bytes).
func NewSaltedLeaf(salt []byte) (*SaltedLeaf, error) {
	if len(salt) != SaltBytes {
		return nil, fmt.Errorf("%w: salt is not the base64 of %d bytes", ErrNotCanonicalizable, SaltBytes)
	}
	b := saltedLeaves.Get().(*SaltedLeaf)
	n := copy(b.prefix[:], fieldKeyDomain)
	b.prefix[n] = 0
	n++
	n += copy(b.prefix[n:], salt)
	b.prefix[n] = 0
	b.vals, b.ms, b.data, b.out, b.comm, b.err = b.vals[:0], b.ms[:0], b.data[:0], b.out[:0], b.comm[:0], nil
	return b, nil
}

// Free returns b to the pool; b must not be used after.
func (b *SaltedLeaf) Free() {
	if cap(b.vals) > 1<<16 || cap(b.out) > 1<<16 { // keep no huge buffers
		b.vals, b.out, b.comm = nil, nil, nil
	}
	saltedLeaves.Put(b)
}

// String adds a member whose value is the string s (invalid UTF-8 becomes
// U+FFFD, as json.Marshal writes it).
func (b *SaltedLeaf) String(name, s string) {
	lo := len(b.vals)
	b.vals = appendJCSString(b.vals, s)
	b.add(name, lo)
}

// StringOrNull adds a member whose value is *s, or null when s is nil.
func (b *SaltedLeaf) StringOrNull(name string, s *string) {
	if s == nil {
		lo := len(b.vals)
		b.vals = append(b.vals, "null"...)
		b.add(name, lo)
		return
	}
	b.String(name, *s)
}

// JSON adds a member whose value is the JSON text v (canonicalized here);
// nil is null. Invalid JSON is ErrNotCanonicalizable, reported by Leaf.
func (b *SaltedLeaf) JSON(name string, v []byte) {
	lo := len(b.vals)
	if v == nil {
		b.vals = append(b.vals, "null"...)
		b.add(name, lo)
		return
	}
	// As a member of the item, one level down (maxDepth counts the item).
	out, err := b.c.canonicalAt(b.vals, v, 1)
	if err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("member %s: %w", name, err)
		}
		return
	}
	b.vals = out
	if name == "data" && len(out) > lo && out[lo] == '{' {
		b.data = b.data[:0]
		for _, m := range b.c.top {
			b.data = append(b.data, dataSpan{m.key, m.colon, m.end})
		}
	}
	b.add(name, lo)
}

func (b *SaltedLeaf) add(name string, lo int) {
	if !Covered([]byte(name)) {
		b.vals = b.vals[:lo]
		return
	}
	b.ms = append(b.ms, leafMember{name, lo, len(b.vals)})
}

// Large reports whether the members added so far are large enough that
// the item's JSON might exceed MaxEntryBytes (names, escapes and the
// members no leaf covers add to it): the caller computes such a leaf from
// the JSON instead (ParseEntry), which refuses what is too large exactly
// as a verifier reading the entry does.
func (b *SaltedLeaf) Large() bool { return len(b.vals) > MaxEntryBytes/8 }

// Leaf returns the leaf hash (and appends nothing else: b may be freed).
func (b *SaltedLeaf) Leaf() (Hash, error) {
	if b.err != nil {
		return Hash{}, b.err
	}
	if len(b.vals) > MaxEntryBytes {
		return Hash{}, fmt.Errorf("%w: entry of %d bytes (at most %d)", ErrTooLarge, len(b.vals), MaxEntryBytes)
	}
	ms := b.ms
	for i := 1; i < len(ms); i++ { // a few dozen names: insertion sort
		for j := i; j > 0 && ms[j].name < ms[j-1].name; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].name == ms[i-1].name {
			return Hash{}, fmt.Errorf("%w: member %s twice", ErrNotCanonicalizable, ms[i].name)
		}
	}
	// The commitments, in name order (the names are ASCII: JCS's order is
	// byte order), and the plain members around "commitments" and
	// "leaf_version", which also sort among them.
	b.comm = append(b.comm[:0], '{')
	for _, m := range ms {
		v := b.vals[m.lo:m.hi]
		if !Committed(m.name) || m.name == "data" && v[0] != '{' {
			continue
		}
		if len(b.comm) > 1 {
			b.comm = append(b.comm, ',')
		}
		b.comm = append(b.comm, '"')
		b.comm = append(b.comm, m.name...) // a covered name: ASCII
		b.comm = append(b.comm, '"', ':')
		if m.name != "data" {
			b.comm = b.appendCommitment(b.comm, m.name, v)
			continue
		}
		b.comm = append(b.comm, '[')
		var buf [24]byte
		for i, d := range b.data {
			if i > 0 {
				b.comm = append(b.comm, ',')
			}
			// v = [name, value]: written in place of the member's colon and
			// a byte after it would overlap; build it in out (unused yet).
			b.out = DataMemberValue(b.out[:0], b.vals[d.key:d.colon], b.vals[d.colon+1:d.end])
			b.comm = b.appendCommitment(b.comm, string(strconv.AppendInt(append(buf[:0], "data/"...), int64(i), 10)), b.out)
		}
		b.comm = append(b.comm, ']')
	}
	b.comm = append(b.comm, '}')
	b.out = append(b.out[:0], '{')
	wrote := false
	member := func(name string, v []byte) {
		if wrote {
			b.out = append(b.out, ',')
		}
		wrote = true
		b.out = append(b.out, '"')
		b.out = append(b.out, name...)
		b.out = append(b.out, '"', ':')
		b.out = append(b.out, v...)
	}
	comm, version := false, false
	for _, m := range ms {
		if !comm && m.name > CommitmentsMember {
			member(CommitmentsMember, b.comm)
			comm = true
		}
		if !version && m.name > LeafVersionMember {
			member(LeafVersionMember, []byte("2"))
			version = true
		}
		v := b.vals[m.lo:m.hi]
		if Committed(m.name) && (m.name != "data" || v[0] == '{') {
			continue
		}
		member(m.name, v)
	}
	if !comm {
		member(CommitmentsMember, b.comm)
	}
	if !version {
		member(LeafVersionMember, []byte("2"))
	}
	b.out = append(b.out, '}')
	b.h.Reset()
	b.h.Write([]byte{0})
	b.h.Write(b.out)
	return Hash(b.h.Sum(b.sum[:0])), nil
}

// appendCommitment appends C(field) of canonical value v, in quotes and
// standard base64.
func (b *SaltedLeaf) appendCommitment(dst []byte, field string, v []byte) []byte {
	n := len(fieldKeyDomain) + 1 + SaltBytes + 1
	k := sha256.Sum256(append(b.prefix[:n], field...)) // in place: the room after the prefix
	var c []byte
	if len(v) <= len(b.small)-len(k) { // one call, on the stack
		copy(b.small[:], k[:])
		copy(b.small[len(k):], v)
		b.sum = sha256.Sum256(b.small[:len(k)+len(v)])
		c = b.sum[:]
	} else {
		b.h.Reset()
		b.h.Write(k[:])
		b.h.Write(v)
		c = b.h.Sum(b.sum[:0])
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, c)
	return append(dst, '"')
}

// appendJCSString appends s as RFC 8785 writes the string json.Marshal
// makes of it: invalid UTF-8 as U+FFFD, only '"', '\' and the control
// characters escaped.
func appendJCSString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
