// Package datadir is dev's DATA directory: its lock (one process each) and
// the keys kept there when no flag gives them.
package datadir

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/cli"
)

// Lock takes an exclusive lock on dir for this process: one data
// directory belongs to one process (two would diverge silently). It fails
// at once, naming the directory and the process that holds it. The lock
// lasts until the process exits (or release is called).
func Lock(dir string) (release func(), err error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		holder := strings.TrimSpace(string(b))
		f.Close()
		if holder == "" {
			holder = "another process"
		} else {
			holder = "process " + holder
		}
		return nil, fmt.Errorf("data dir %s is in use by %s (one --data directory belongs to one process)", dir, holder)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { _ = f.Close() }, nil
}

// The files of the keys kept in DATA.
const (
	BootstrapHashFile = "bootstrap_key.sha256"
	BootstrapKeyFile  = "bootstrap.key"
	CursorKeyFile     = "cursor.key"
	PageTokenKeyFile  = "page_token.key"
	SecretsKeyFile    = "secrets.key"
)

// BootstrapKey returns the hash of the platform-admin key: the given key, or
// the one kept in dataDir (dev), or a new one that is printed to out and
// kept in dataDir. A dev data directory is not a production tenant: the key
// is kept there in the clear too (bootstrap.key, 0600), so that `dev --demo`
// prints it in full at every start; known is that key (or "" when only its
// hash is kept, by a data directory of an earlier release).
func BootstrapKey(given, dataDir string, out io.Writer) (hash, known string, err error) {
	if given != "" {
		if len(given) < 16 {
			return "", "", cli.UsageErrorf("--bootstrap-key must be at least 16 characters")
		}
		return auth.HashKey(given), "", nil
	}
	path := filepath.Join(dataDir, BootstrapHashFile)
	plainPath := filepath.Join(dataDir, BootstrapKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		h := strings.TrimSpace(string(b))
		if raw, err := hex.DecodeString(h); err != nil || len(raw) != 32 {
			return "", "", fmt.Errorf("%s is corrupt; delete it to generate a new bootstrap key", path)
		}
		if p, err := os.ReadFile(plainPath); err == nil {
			if key := strings.TrimSpace(string(p)); auth.HashKey(key) == h {
				fmt.Fprintf(out, "bootstrap key: kept in %s (platform admin; delete %s and it to get a new one)\n", plainPath, BootstrapHashFile)
				return h, key, nil
			}
			return "", "", fmt.Errorf("%s does not match %s; delete both to generate a new bootstrap key", plainPath, path)
		}
		fmt.Fprintf(out, "bootstrap key: kept as a hash in %s (it was printed at the first start; delete that file to get a new one)\n", path)
		return h, "", nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", err
	}
	key := "ark_" + cli.RandomToken(32)
	h := auth.HashKey(key)
	if err := cli.WriteFileAtomic(plainPath, []byte(key+"\n"), 0o600); err != nil {
		return "", "", err
	}
	if err := cli.WriteFileAtomic(path, []byte(h+"\n"), 0o600); err != nil {
		return "", "", err
	}
	fmt.Fprintf(out, "bootstrap key (platform admin, kept in %s): %s\n", plainPath, key)
	return h, key, nil
}

// Keys parses comma-separated base64 keys of flag, or keeps a generated
// key in dataDir/file when none are given (dev). exact: every key must be
// that many bytes; otherwise at least 16.
func Keys(flagName, given, dataDir, file string, exact int) ([][]byte, error) {
	okLen := func(k []byte) bool { return (exact == 0 && len(k) >= 16) || (exact != 0 && len(k) == exact) }
	if given != "" {
		var keys [][]byte
		for _, part := range strings.Split(given, ",") {
			k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(part))
			if err != nil || !okLen(k) {
				want := "at least 16 bytes"
				if exact != 0 {
					want = fmt.Sprintf("%d bytes", exact)
				}
				return nil, cli.UsageErrorf("--%s: each key must be base64 of %s", flagName, want)
			}
			keys = append(keys, k)
		}
		return keys, nil
	}
	if dataDir == "" {
		return nil, cli.UsageErrorf("--%s is required (comma-separated base64 keys; the first is used, all are accepted)", flagName)
	}
	path := filepath.Join(dataDir, file)
	if b, err := os.ReadFile(path); err == nil {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || !okLen(k) {
			return nil, fmt.Errorf("%s is corrupt", path)
		}
		return [][]byte{k}, nil
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := cli.WriteFileAtomic(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return [][]byte{k}, nil
}
