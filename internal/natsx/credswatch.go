package natsx

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
)

// CredsPollInterval is how often a connection looks at its credentials
// file; a change (new, valid credentials: `auditrail nats-setup` run
// again, a secret manager's rotation) makes it reconnect with them, so
// that credentials rotate without restarting a role.
var CredsPollInterval = 10 * time.Second

// credsWatcher reconnects nc when its credentials file changes.
type credsWatcher struct {
	path   string
	log    *slog.Logger
	sum    [sha256.Size]byte
	closed chan struct{}
}

func newCredsWatcher(path string, log *slog.Logger) *credsWatcher {
	w := &credsWatcher{path: path, log: log, closed: make(chan struct{})}
	if b, err := os.ReadFile(path); err == nil {
		w.sum = sha256.Sum256(b)
	}
	return w
}

// stop ends run (the connection closed).
func (w *credsWatcher) stop(*nats.Conn) { close(w.closed) }

// run polls the file until the connection closes. A file that is being
// written, or that holds no valid credentials, is skipped until it does:
// the connection keeps the credentials it has.
func (w *credsWatcher) run(nc *nats.Conn) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("nats credentials watcher panicked; credentials are no longer reloaded", "panic", r)
		}
	}()
	t := time.NewTicker(CredsPollInterval)
	defer t.Stop()
	for {
		select {
		case <-w.closed:
			return
		case <-t.C:
		}
		b, err := os.ReadFile(w.path)
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		if bytes.Equal(sum[:], w.sum[:]) {
			continue
		}
		if tok, err := jwt.ParseDecoratedJWT(b); err != nil || tok == "" {
			continue
		} else if _, err := jwt.DecodeUserClaims(tok); err != nil {
			continue
		}
		if _, err := jwt.ParseDecoratedUserNKey(b); err != nil {
			continue
		}
		w.sum = sum
		w.log.Info("nats credentials changed; reconnecting with them", "creds", w.path)
		if err := nc.ForceReconnect(); err != nil {
			w.log.Warn("nats reconnect with the new credentials", "err", err)
		}
	}
}
