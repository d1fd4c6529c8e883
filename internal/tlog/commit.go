package tlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Leaves of version 2 commit to the identifying fields of an entry one by
// one, so that an erasure can replace some of them and every other field
// still verifies (CONTRACT.md "Tamper evidence", "Committed fields").
//
// An entry of version 2 is served with a member "salt" (standard base64 of
// SaltBytes random bytes, chosen by the producer, which no leaf covers).
// Its leaf hashes the JCS of
//
//	{<every covered member that is not committed, as served>,
//	 "commitments": {<committed member>: C, …, "data": [C, …]},
//	 "leaf_version": 2}
//
// where the committed members are those of Committed that the entry has,
// and, for a field f with canonical value v (JCS),
//
//	K(f) = SHA-256("auditrail field key v2" ‖ 0x00 ‖ salt ‖ 0x00 ‖ f)
//	C(f) = SHA-256(K(f) ‖ v)
//
// (each C in standard base64). A data that is an object is committed member
// by member: its i-th member in JCS order, named n with value w, is the
// field "data/i" with v = JCS([n, w]) and commitments.data lists the C of
// its members in that order; any other data (null) is a member as served.
//
// An erasure replaces some committed fields of an entry and forgets its
// salt: the entry is then served with the member
//
//	"erasure": {"id": E, "leaf_hash": <its leaf>, "fields": {
//	   <committed member>: {"key": K(f)} | {"commitment": C(f)}, …,
//	   "data": [{"member": n, "key": K("data/i")} | {"commitment": C}, …]}}
//
// a key where the served value is the original (checked), the commitment
// where it was erased (a pseudonym, not checked). From K(f) nothing can be
// learnt about another field, so the erased values cannot be guessed back
// from their commitments. The leaf so computed must be the leaf_hash.

// Members of a version 2 entry.
const (
	SaltMember        = "salt"
	CommitmentsMember = "commitments"
	LeafVersionMember = "leaf_version"
	// SaltBytes is the length of an entry's salt.
	SaltBytes = 16
)

// Committed reports whether a covered member is committed field by field
// in a version 2 leaf: the values an erasure may replace.
func Committed(name string) bool {
	switch name {
	case "client_ip", "display_name", "principal_id", "user_id", "resource_id", "resource_display", "data", "error":
		return true
	}
	return false
}

// FieldKey is K(field) of an entry's salt.
func FieldKey(salt []byte, field string) [32]byte {
	h := sha256.New()
	h.Write([]byte("auditrail field key v2\x00"))
	h.Write(salt)
	h.Write([]byte{0})
	h.Write([]byte(field))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Commitment is C of a field of key k and canonical value v.
func Commitment(k [32]byte, v []byte) [32]byte {
	h := sha256.New()
	h.Write(k[:])
	h.Write(v)
	var c [32]byte
	h.Sum(c[:0])
	return c
}

// DataField is the field name of data's i-th member.
func DataField(i int) string { return "data/" + strconv.Itoa(i) }

// DataMemberValue is the canonical value committed for a data member of
// canonical name (quoted, as JCS writes it) and canonical value.
func DataMemberValue(dst, name, value []byte) []byte {
	dst = append(dst, '[')
	dst = append(dst, name...)
	dst = append(dst, ',')
	dst = append(dst, value...)
	return append(dst, ']')
}

// Opening is one field of an erased entry's "fields": its key (the served
// value is the original) or its commitment (erased); Member names the
// served data member of a data position opened by its key.
type Opening struct {
	Member     *string `json:"member,omitempty"`
	Key        string  `json:"key,omitempty"`
	Commitment string  `json:"commitment,omitempty"`
}

// ErasedFields is the "fields" of an erased entry of version 2.
type ErasedFields struct {
	Fields map[string]Opening
	Data   []Opening
	// HasData: the entry's data was committed member by member.
	HasData bool
}

// MarshalJSON writes the fields as one object, data as a list.
func (f ErasedFields) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(f.Fields)+1)
	for k, o := range f.Fields {
		m[k] = o
	}
	if f.HasData {
		d := f.Data
		if d == nil {
			d = []Opening{}
		}
		m["data"] = d
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *ErasedFields) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*f = ErasedFields{Fields: map[string]Opening{}}
	for k, raw := range m {
		if !Committed(k) {
			return fmt.Errorf("%q is not a committed field", k)
		}
		if k == "data" {
			if err := json.Unmarshal(raw, &f.Data); err != nil {
				return fmt.Errorf("data: %w", err)
			}
			f.HasData = true
			continue
		}
		var o Opening
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.Fields[k] = o
	}
	return nil
}

// erasedMember is the erasure member of a version 2 erased entry.
type erasedMember struct {
	ID       string        `json:"id"`
	LeafHash string        `json:"leaf_hash"`
	Fields   *ErasedFields `json:"fields"`
}

// opener gives the commitment of each committed field of an entry.
type opener interface {
	// commit returns C of field f of canonical value v (v nil: the field
	// is not served: only a commitment opens it).
	commit(f string, v []byte) ([32]byte, error)
	// erasedField reports whether field f is opened by its commitment.
	erasedField(f string) bool
}

type saltOpener struct{ salt []byte }

func (o saltOpener) commit(f string, v []byte) ([32]byte, error) {
	if v == nil {
		return [32]byte{}, fmt.Errorf("%w: field %s is missing", ErrNotCanonicalizable, f)
	}
	return Commitment(FieldKey(o.salt, f), v), nil
}
func (saltOpener) erasedField(string) bool { return false }

type fieldsOpener struct{ f *ErasedFields }

func decode32(s, what string) ([32]byte, error) {
	var h [32]byte
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("%w: %s is not the base64 of 32 bytes", ErrNotCanonicalizable, what)
	}
	copy(h[:], b)
	return h, nil
}

func (o fieldsOpener) open(op Opening, f string, v []byte) ([32]byte, error) {
	switch {
	case op.Key != "" && op.Commitment != "":
		return [32]byte{}, fmt.Errorf("%w: field %s has both a key and a commitment", ErrNotCanonicalizable, f)
	case op.Commitment != "":
		return decode32(op.Commitment, "the commitment of "+f)
	case op.Key != "":
		k, err := decode32(op.Key, "the key of "+f)
		if err != nil {
			return k, err
		}
		if v == nil {
			return k, fmt.Errorf("%w: field %s is opened by its key but not served", ErrNotCanonicalizable, f)
		}
		return Commitment(k, v), nil
	}
	return [32]byte{}, fmt.Errorf("%w: field %s has neither a key nor a commitment", ErrNotCanonicalizable, f)
}

func (o fieldsOpener) commit(f string, v []byte) ([32]byte, error) {
	if i, ok := dataIndex(f); ok {
		if i >= len(o.f.Data) {
			return [32]byte{}, fmt.Errorf("%w: no opening of %s", ErrNotCanonicalizable, f)
		}
		return o.open(o.f.Data[i], f, v)
	}
	op, ok := o.f.Fields[f]
	if !ok {
		return [32]byte{}, fmt.Errorf("%w: no opening of field %s", ErrNotCanonicalizable, f)
	}
	return o.open(op, f, v)
}

// dataPosition returns the served data member that opens position i by
// its key (ok false: the position is opened by its commitment).
func (o fieldsOpener) dataPosition(i int) (string, bool) {
	if i >= len(o.f.Data) || o.f.Data[i].Key == "" || o.f.Data[i].Member == nil {
		return "", false
	}
	return *o.f.Data[i].Member, true
}

func (o fieldsOpener) erasedField(f string) bool {
	op, ok := o.f.Fields[f]
	return ok && op.Commitment != ""
}

func dataIndex(f string) (int, bool) {
	rest, ok := bytes.CutPrefix([]byte(f), []byte("data/"))
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(string(rest))
	return i, err == nil && i >= 0
}

// served is a covered member of an entry: its name and canonical value.
type served struct {
	name  string
	value []byte
}

// canonicalV2 appends to dst the canonical bytes of a version 2 leaf of
// the covered members ms (in JCS order), their committed fields opened by
// o, and returns the fields o says were erased.
func canonicalV2(dst []byte, ms []served, o opener) ([]byte, []string, error) {
	var out []served
	var erased []string
	comm := []byte{'{'}
	first := true
	add := func(name string, c []byte) {
		if !first {
			comm = append(comm, ',')
		}
		first = false
		comm = strconv.AppendQuote(comm, name)
		comm = append(comm, ':')
		comm = append(comm, c...)
	}
	b64 := func(h [32]byte) []byte {
		return []byte(`"` + base64.StdEncoding.EncodeToString(h[:]) + `"`)
	}
	for _, m := range ms {
		if !Committed(m.name) || (m.name == "data" && (len(m.value) == 0 || m.value[0] != '{')) {
			out = append(out, m)
			continue
		}
		if m.name != "data" {
			c, err := o.commit(m.name, m.value)
			if err != nil {
				return nil, nil, err
			}
			if o.erasedField(m.name) {
				erased = append(erased, m.name)
			}
			add(m.name, b64(c))
			continue
		}
		list, n, err := commitData(m.value, o)
		if err != nil {
			return nil, nil, err
		}
		if n > 0 {
			erased = append(erased, "data")
		}
		add("data", list)
	}
	comm = append(comm, '}')
	out = append(out, served{CommitmentsMember, comm}, served{LeafVersionMember, []byte("2")})
	// The names are ASCII: JCS's order (UTF-16 code units) is byte order.
	slices.SortFunc(out, func(a, b served) int { return strings.Compare(a.name, b.name) })
	dst = append(dst, '{')
	for i, m := range out {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, m.name)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), erased, nil
}

// commitData returns the commitments.data list of a canonical data object
// and how many of its positions are erased (opened by a commitment).
func commitData(data []byte, o opener) ([]byte, int, error) {
	members, err := readDataMembers(data)
	if err != nil {
		return nil, 0, err
	}
	list := []byte{'['}
	erased := 0
	var buf []byte
	if so, ok := o.(saltOpener); ok {
		for i, m := range members {
			buf = DataMemberValue(buf[:0], m.quoted, m.val)
			cm, err := so.commit(DataField(i), buf)
			if err != nil {
				return nil, 0, err
			}
			if i > 0 {
				list = append(list, ',')
			}
			list = append(list, `"`+base64.StdEncoding.EncodeToString(cm[:])+`"`...)
		}
		return append(list, ']'), 0, nil
	}
	fo := o.(fieldsOpener)
	used := make([]bool, len(members))
	for i := range fo.f.Data {
		var v []byte
		if name, ok := fo.dataPosition(i); ok {
			j := slices.IndexFunc(members, func(m dataMember) bool { return m.name == name })
			if j < 0 || used[j] {
				return nil, 0, fmt.Errorf("%w: data position %d opens member %q, which the entry's data does not have once", ErrNotCanonicalizable, i, name)
			}
			used[j] = true
			v = DataMemberValue(nil, members[j].quoted, members[j].val)
		} else {
			erased++
		}
		cm, err := fo.commit(DataField(i), v)
		if err != nil {
			return nil, 0, err
		}
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, `"`+base64.StdEncoding.EncodeToString(cm[:])+`"`...)
	}
	return append(list, ']'), erased, nil
}

// OpenErased returns the "fields" of an erasure of a version 2 entry: the
// entry's covered members before the erasure, orig, and after it, now
// (both as served, JSON objects), and its salt. A committed field whose
// value changed is opened by its commitment, the others by their keys;
// data is compared member by member (a renamed member is erased).
func OpenErased(orig, now []byte, salt []byte) (ErasedFields, error) {
	ms, err := coveredMembers(orig)
	if err != nil {
		return ErasedFields{}, err
	}
	ns, err := coveredMembers(now)
	if err != nil {
		return ErasedFields{}, err
	}
	after := map[string][]byte{}
	for _, m := range ns {
		after[m.name] = m.value
	}
	f := ErasedFields{Fields: map[string]Opening{}}
	so := saltOpener{salt}
	for _, m := range ms {
		if !Committed(m.name) {
			if !bytes.Equal(after[m.name], m.value) {
				return f, fmt.Errorf("%w: member %s is not committed and cannot be erased", ErrInvalidArgument, m.name)
			}
			continue
		}
		if m.name == "data" && (len(m.value) == 0 || m.value[0] != '{') {
			if !bytes.Equal(after[m.name], m.value) {
				return f, fmt.Errorf("%w: data that is not an object cannot be erased", ErrInvalidArgument)
			}
			continue
		}
		if m.name == "data" {
			f.HasData = true
			if f.Data, err = openData(m.value, after["data"], salt); err != nil {
				return f, err
			}
			continue
		}
		if bytes.Equal(after[m.name], m.value) {
			k := FieldKey(salt, m.name)
			f.Fields[m.name] = Opening{Key: base64.StdEncoding.EncodeToString(k[:])}
			continue
		}
		c, _ := so.commit(m.name, m.value)
		f.Fields[m.name] = Opening{Commitment: base64.StdEncoding.EncodeToString(c[:])}
	}
	return f, nil
}

// openData opens the positions of data orig (canonical object) whose
// member is unchanged in now by their keys, the others by commitments.
func openData(orig, now []byte, salt []byte) ([]Opening, error) {
	om, err := readDataMembers(orig)
	if err != nil {
		return nil, err
	}
	nm, err := readDataMembers(now)
	if err != nil {
		return nil, err
	}
	ops := make([]Opening, len(om))
	for i, m := range om {
		j := slices.IndexFunc(nm, func(n dataMember) bool { return n.name == m.name })
		f := DataField(i)
		if j >= 0 && bytes.Equal(nm[j].val, m.val) {
			k := FieldKey(salt, f)
			name := m.name
			ops[i] = Opening{Member: &name, Key: base64.StdEncoding.EncodeToString(k[:])}
			continue
		}
		c := Commitment(FieldKey(salt, f), DataMemberValue(nil, m.quoted, m.val))
		ops[i] = Opening{Commitment: base64.StdEncoding.EncodeToString(c[:])}
	}
	return ops, nil
}

// coveredMembers returns the covered members of an entry (a JSON object),
// canonical, in JCS order.
func coveredMembers(item []byte) ([]served, error) {
	c := canonicalizers.Get().(*canonicalizer)
	defer canonicalizers.Put(c)
	canon, err := c.canonical(nil, item)
	if err != nil {
		return nil, err
	}
	if canon[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrNotCanonicalizable)
	}
	var out []served
	for _, m := range c.top {
		name := string(canon[m.key+1 : m.colon-1])
		if Covered([]byte(name)) {
			out = append(out, served{name, canon[m.colon+1 : m.end]})
		}
	}
	return out, nil
}

// v2Of reads the version 2 members of an entry: its salt, or the fields
// of its erasure (nil, nil: a version 1 entry). canon is the entry's
// canonical bytes and top its members.
func v2Of(canon []byte, top []member) (opener, error) {
	var o opener
	for _, m := range top {
		name := string(canon[m.key+1 : m.colon-1])
		v := canon[m.colon+1 : m.end]
		switch name {
		case SaltMember:
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, fmt.Errorf("%w: salt is not a string", ErrNotCanonicalizable)
			}
			salt, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(salt) != SaltBytes {
				return nil, fmt.Errorf("%w: salt is not the base64 of %d bytes", ErrNotCanonicalizable, SaltBytes)
			}
			if o != nil {
				return nil, fmt.Errorf("%w: an entry with both a salt and erased fields", ErrNotCanonicalizable)
			}
			o = saltOpener{salt}
		case ErasureMember:
			if !bytes.Contains(v, []byte(`"fields"`)) {
				continue
			}
			var em erasedMember
			if err := json.Unmarshal(v, &em); err != nil {
				return nil, fmt.Errorf("%w: erasure: %w", ErrNotCanonicalizable, err)
			}
			if em.Fields == nil {
				continue
			}
			if o != nil {
				return nil, fmt.Errorf("%w: an entry with both a salt and erased fields", ErrNotCanonicalizable)
			}
			o = fieldsOpener{em.Fields}
		}
	}
	return o, nil
}

// Reopen returns the fields of an entry erased again: prev are the fields
// of its earlier erasure, cur the entry as served now (JSON object) and
// next the entry after this erasure. A field opened by its key whose value
// changes is opened by its commitment from now on (C of its key and the
// current value, which hashes as the original: it was checked).
func Reopen(prev ErasedFields, cur, next []byte) (ErasedFields, error) {
	cs, err := coveredMembers(cur)
	if err != nil {
		return ErasedFields{}, err
	}
	ns, err := coveredMembers(next)
	if err != nil {
		return ErasedFields{}, err
	}
	before, after := map[string][]byte{}, map[string][]byte{}
	for _, m := range cs {
		before[m.name] = m.value
	}
	for _, m := range ns {
		after[m.name] = m.value
	}
	out := ErasedFields{Fields: make(map[string]Opening, len(prev.Fields)), HasData: prev.HasData}
	for f, op := range prev.Fields {
		if op.Key == "" || bytes.Equal(before[f], after[f]) {
			out.Fields[f] = op
			continue
		}
		k, err := decode32(op.Key, "the key of "+f)
		if err != nil {
			return out, err
		}
		c := Commitment(k, before[f])
		out.Fields[f] = Opening{Commitment: base64.StdEncoding.EncodeToString(c[:])}
	}
	for f, v := range after {
		if _, ok := before[f]; Committed(f) || ok && bytes.Equal(before[f], v) {
			continue
		}
		return out, fmt.Errorf("%w: member %s is not committed and cannot be erased", ErrInvalidArgument, f)
	}
	if !prev.HasData {
		return out, nil
	}
	cur2, err := dataMembers(before["data"])
	if err != nil {
		return out, err
	}
	next2, err := dataMembers(after["data"])
	if err != nil {
		return out, err
	}
	out.Data = make([]Opening, len(prev.Data))
	for i, op := range prev.Data {
		if op.Key == "" || op.Member == nil {
			out.Data[i] = op
			continue
		}
		c, ok := cur2[*op.Member]
		if !ok {
			return out, fmt.Errorf("%w: data position %d opens member %q, which the entry does not have", ErrInvalidArgument, i, *op.Member)
		}
		if n, ok := next2[*op.Member]; ok && bytes.Equal(n.val, c.val) {
			out.Data[i] = op
			continue
		}
		k, err := decode32(op.Key, "the key of "+DataField(i))
		if err != nil {
			return out, err
		}
		cm := Commitment(k, DataMemberValue(nil, c.quoted, c.val))
		out.Data[i] = Opening{Commitment: base64.StdEncoding.EncodeToString(cm[:])}
	}
	return out, nil
}

// dataMember is a member of a data object: its name, the name quoted as
// JCS writes it and its canonical value.
type dataMember struct {
	name        string
	quoted, val []byte
}

// readDataMembers reads the members of a data object in JCS order (none
// when data is not an object).
func readDataMembers(doc []byte) ([]dataMember, error) {
	if len(doc) == 0 || doc[0] != '{' {
		return nil, nil
	}
	c := canonicalizers.Get().(*canonicalizer)
	defer canonicalizers.Put(c)
	canon, err := c.canonical(nil, doc)
	if err != nil {
		return nil, err
	}
	out := make([]dataMember, len(c.top))
	for i, m := range c.top {
		if err := json.Unmarshal(canon[m.key:m.colon], &out[i].name); err != nil {
			return nil, fmt.Errorf("%w: data member name: %w", ErrNotCanonicalizable, err)
		}
		out[i].quoted, out[i].val = canon[m.key:m.colon], canon[m.colon+1:m.end]
	}
	return out, nil
}

// dataMembers is readDataMembers by name.
func dataMembers(doc []byte) (map[string]dataMember, error) {
	ms, err := readDataMembers(doc)
	if err != nil {
		return nil, err
	}
	out := make(map[string]dataMember, len(ms))
	for _, m := range ms {
		out[m.name] = m
	}
	return out, nil
}
