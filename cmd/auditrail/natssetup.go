package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/auditrail/auditrail/internal/natsx"
)

// runNATSSetup writes what a nats-server needs to serve auditrail with
// authentication (operator mode, memory resolver), and the credentials
// of every role. Keys already in --keys are kept, so running it again
// re-issues credentials without invalidating the server configuration.
func runNATSSetup(_ context.Context, args []string) error {
	fs := newFlags("nats-setup")
	out := fs.String("out", "", "", "directory of the server include (auth.conf) and the credentials <role>.creds (required)")
	keys := fs.String("keys", "", "", "directory of the operator and account seeds (default OUT/keys; keep it away from the roles)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *out == "" {
		return usageErrorf("--out is required")
	}
	if *keys == "" {
		*keys = filepath.Join(*out, "keys")
	}
	auth, err := natsx.LoadOrCreateAuth(*keys)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := auth.WriteCreds(*out); err != nil {
		return err
	}
	conf, err := auth.ServerConf()
	if err != nil {
		return err
	}
	confPath := filepath.Join(*out, natsx.ServerConfFile)
	// The include holds only public JWTs; world-readable so that a server
	// running as another user can read it.
	if err := writeFileAtomic(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	fmt.Printf("nats-server include: %s (nats-server -c %s --jetstream, or `include` it)\n", confPath, confPath)
	for _, r := range natsx.Roles {
		fmt.Printf("credentials of %-12s %s\n", r+":", natsx.CredsFile(*out, r))
	}
	return nil
}
