package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes an exclusive lock on dir for this process: one data
// directory belongs to one process (two would diverge silently). It fails
// at once, naming the directory and the process that holds it. The lock
// lasts until the process exits (or release is called).
func lockDataDir(dir string) (release func(), err error) {
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
