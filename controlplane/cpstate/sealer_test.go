package cpstate

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealer(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	s1, err := NewSealer(k1)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s1.Seal("secret.a", []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("plaintext visible in sealed value")
	}
	if pt, err := s1.Open("secret.a", sealed); err != nil || string(pt) != "hunter2" {
		t.Fatalf("open: %q %v", pt, err)
	}
	if _, err := s1.Open("secret.b", sealed); !errors.Is(err, ErrSealed) {
		t.Errorf("moved value opened: %v", err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := s1.Open("secret.a", tampered); !errors.Is(err, ErrSealed) {
		t.Errorf("tampered value opened: %v", err)
	}
	rotated, _ := NewSealer(k2, k1)
	if pt, err := rotated.Open("secret.a", sealed); err != nil || string(pt) != "hunter2" {
		t.Errorf("rotated sealer cannot open old value: %v", err)
	}
	s2, _ := NewSealer(k2)
	if _, err := s2.Open("secret.a", sealed); !errors.Is(err, ErrSealed) {
		t.Errorf("other key opened: %v", err)
	}
	if _, err := NewSealer([]byte("short")); err == nil {
		t.Error("short key accepted")
	}
}
