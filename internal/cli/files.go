package cli

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// WriteFileAtomic writes data to path through a temporary file renamed
// over it, so that a reader never sees half a file.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// RandomToken is n random bytes in unpadded base64url.
func RandomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// CheckFree fails at once when addr cannot be listened on (another process
// holds the port), instead of after a start-up timeout.
func CheckFree(what, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%s %s: address already in use", what, addr)
		}
		return fmt.Errorf("%s %s: %w", what, addr, err)
	}
	return ln.Close()
}
