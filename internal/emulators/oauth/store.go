package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// load reads the state file; a missing file is an empty state.
func (s *Server) load() error {
	b, err := os.ReadFile(s.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("oauth emulator: read state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("oauth emulator: state file %s: %w", s.cfg.StateFile, err)
	}
	if st.Grants != nil {
		s.st.Grants = st.Grants
	}
	if st.Access != nil {
		s.st.Access = st.Access
	}
	if st.Refresh != nil {
		s.st.Refresh = st.Refresh
	}
	return nil
}

// saveLocked writes the state file, when there is one: to a temporary file
// (0600) in the same directory, synced, then renamed over the old one.
func (s *Server) saveLocked() {
	if s.cfg.StateFile == "" {
		return
	}
	if err := writeAtomic(s.cfg.StateFile, s.st); err != nil {
		s.cfg.Logger.Error("oauth emulator: cannot save state", "file", s.cfg.StateFile, "err", err)
	}
}

func writeAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
