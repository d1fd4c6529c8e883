package pagetoken

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

var (
	oldKey = bytes.Repeat([]byte("o"), 32)
	newKey = bytes.Repeat([]byte("n"), 16)
	badKey = bytes.Repeat([]byte("x"), 32)
)

func TestSealOpen(t *testing.T) {
	old, _ := New("ptk1", [][]byte{oldKey})
	rotated, _ := New("ptk1", [][]byte{newKey, oldKey})
	other, _ := New("ptk1", [][]byte{badKey})
	otherPurpose, _ := New("xtk1", [][]byte{oldKey})
	bind, payload := []byte("u1\x00query"), []byte("/me/messages?$skip=10")
	tok, err := old.Seal(bind, payload)
	if err != nil || !strings.HasPrefix(tok, "ptk1.") || strings.Contains(tok, "messages") {
		t.Fatalf("Seal: %q, %v", tok, err)
	}
	fresh, _ := rotated.Seal(bind, payload)
	forged := "ptk1." + base64.RawURLEncoding.EncodeToString(append([]byte{1}, make([]byte, 60)...))
	tests := []struct {
		name string
		s    *Sealer
		tok  string
		bind []byte
		want error
	}{
		{"same key", old, tok, bind, nil},
		{"signed with the old key, keys rotated", rotated, tok, bind, nil},
		{"signed with the new key", rotated, fresh, bind, nil},
		{"new key unknown to an old instance", old, fresh, bind, ErrSignature},
		{"another key", other, tok, bind, ErrSignature},
		{"another purpose", otherPurpose, "xtk1" + tok[4:], bind, ErrSignature},
		{"another listing", old, tok, []byte("u2\x00query"), ErrBinding},
		{"forged", old, forged, bind, ErrSignature},
		{"altered", old, tok[:len(tok)-2] + "AA", bind, ErrSignature},
		{"truncated", old, tok[:10], bind, ErrMalformed},
		{"no prefix", old, tok[5:], bind, ErrMalformed},
		{"not base64", old, "ptk1.!!!", bind, ErrMalformed},
		{"line breaks inside", old, tok[:12] + "\r\n" + tok[12:], bind, ErrMalformed},
		{"too long", old, "ptk1." + strings.Repeat("A", MaxTokenLen), bind, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.Open(tc.tok, tc.bind)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Open: %q, %v, want %v", got, err, tc.want)
			}
			if err == nil && !bytes.Equal(got, payload) {
				t.Fatalf("payload %q", got)
			}
		})
	}
	if tok, err := old.Seal(bind, nil); tok != "" || err != nil {
		t.Errorf("empty payload: %q, %v", tok, err)
	}
	if _, err := old.Seal(bind, bytes.Repeat([]byte("x"), MaxTokenLen)); !errors.Is(err, ErrTooLong) {
		t.Errorf("long payload: %v", err)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		purpose string
		keys    [][]byte
		ok      bool
	}{
		{"ptk1", [][]byte{oldKey}, true},
		{"ptk1", [][]byte{newKey, oldKey}, true},
		{"ptk1", nil, false},
		{"ptk1", [][]byte{oldKey, []byte("short")}, false},
		{"", [][]byte{oldKey}, false},
		{"a.b", [][]byte{oldKey}, false},
	} {
		if _, err := New(tc.purpose, tc.keys); (err == nil) != tc.ok {
			t.Errorf("New(%q, %d keys): %v", tc.purpose, len(tc.keys), err)
		}
	}
}

// FuzzOpen: tokens come back from callers. Open never panics, and accepts
// only what the sealer itself sealed for that binding.
func FuzzOpen(f *testing.F) {
	s, _ := New("ptk1", [][]byte{newKey, oldKey})
	bind := []byte("u1")
	tok, _ := s.Seal(bind, []byte("/me/messages?$skip=10"))
	f.Add(tok)
	f.Add("ptk1.")
	f.Add("ptk1.AQ")
	f.Add(tok[:len(tok)-1] + "B")
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := s.Open(tok, bind)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrSignature) && !errors.Is(err, ErrBinding) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		again, err := s.Seal(bind, p)
		if err != nil || again != tok {
			t.Fatalf("accepted %q, which is not what Seal makes of its payload (%q, %v)", tok, again, err)
		}
	})
}
