// Package natssetup is `auditrail nats-setup`: the NATS server authentication include and the credentials of every role.
package natssetup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/natsx"
)

// The environment twins of nats-setup's flags. They used to be the
// default AUDITRAIL_OUT and AUDITRAIL_KEYS, and the latter read like a typo
// of AUDITRAIL_KEY, the API key of the admin CLI; the old names still work
// for one release, with a warning.
const (
	envNATSSetupOut  = "AUDITRAIL_NATS_SETUP_OUT_DIR"
	envNATSSetupKeys = "AUDITRAIL_NATS_SETUP_KEYS_DIR"
)

// natsSetupDeprecatedEnv maps each deprecated variable to its flag and the
// variable that replaces it.
var natsSetupDeprecatedEnv = []deprecatedEnv{
	{old: "AUDITRAIL_OUT", flag: "out", env: envNATSSetupOut},
	{old: "AUDITRAIL_KEYS", flag: "keys", env: envNATSSetupKeys},
}

// deprecatedEnv is a former environment twin of flag, replaced by env.
type deprecatedEnv struct{ old, flag, env string }

// applyDeprecatedEnv sets each flag given neither on the command line nor
// by its current variable from its deprecated variable, and warns on w.
func applyDeprecatedEnv(f *cli.Flags, w io.Writer, deps []deprecatedEnv) error {
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, d := range deps {
		v, ok := os.LookupEnv(d.old)
		if !ok {
			continue
		}
		if _, cur := os.LookupEnv(d.env); cur || given[d.flag] {
			fmt.Fprintf(w, "warning: %s is deprecated and ignored here (--%s or %s is set)\n", d.old, d.flag, d.env)
			continue
		}
		fmt.Fprintf(w, "warning: %s is deprecated, use %s (or --%s); it stops working in the next release\n", d.old, d.env, d.flag)
		if err := f.Set(d.flag, v); err != nil {
			return cli.UsageErrorf("%s: %w", d.old, err)
		}
	}
	return nil
}

// Run writes what a nats-server needs to serve auditrail with
// authentication (operator mode, memory resolver), and the credentials
// of every role. Keys already in --keys are kept, so running it again
// re-issues credentials without invalidating the server configuration.
func Run(_ context.Context, args []string) error {
	fs := cli.NewFlags("auditrail nats-setup")
	out := fs.String("out", envNATSSetupOut, "", "directory of the server include (auth.conf) and the credentials <role>.creds (required)")
	keys := fs.String("keys", envNATSSetupKeys, "", "directory of the operator and account seeds (default OUT/keys; keep it away from the roles)")
	streamKey := fs.String("stream-key", "AUDITRAIL_NATS_SETUP_STREAM_KEY", "", "also copy the key that signs stream credentials (KEYS/siem.nk) to this file (0600), for the controlplane role's --nats-stream-key")
	tlsOut := fs.String("tls-out", "AUDITRAIL_NATS_SETUP_TLS_OUT_DIR", "", "also write the NATS servers' TLS files here: ca.pem, and server.pem and server.key (0600) for --tls-hosts, signed by a CA kept in KEYS; the CA is also written to OUT/ca.pem, the roles' --nats-tls-ca")
	tlsHosts := fs.String("tls-hosts", "AUDITRAIL_NATS_SETUP_TLS_HOSTS", "localhost", "comma-separated host names (or IPs) of the NATS servers, in the servers' certificate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyDeprecatedEnv(fs, os.Stderr, natsSetupDeprecatedEnv); err != nil {
		return err
	}
	if *out == "" {
		return cli.UsageErrorf("--out is required")
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
	if err := cli.WriteFileAtomic(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	fmt.Printf("nats-server include: %s (nats-server -c %s --jetstream, or `include` it)\n", confPath, confPath)
	for _, r := range natsx.Roles {
		// A client of a role's credentials receives replies (a publish's
		// acknowledgement, a request's answer) only under its own inbox
		// prefix: nats.go's default _INBOX is refused.
		inbox := "any inbox"
		if r != natsx.RoleAdmin {
			inbox = "inbox prefix " + natsx.InboxPrefix(r) + " (nats.CustomInboxPrefix)"
		}
		fmt.Printf("credentials of %-12s %s  %s\n", r+":", natsx.CredsFile(*out, r), inbox)
	}
	keyPath := natsx.StreamKeyFile(*keys)
	if *streamKey != "" {
		seed, err := os.ReadFile(keyPath)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*streamKey), 0o700); err != nil {
			return err
		}
		if err := cli.WriteFileAtomic(*streamKey, seed, 0o600); err != nil {
			return err
		}
		keyPath = *streamKey
	}
	fmt.Printf("stream credentials key:     %s (controlplane --nats-stream-key; signs the organizations' stream credentials)\n", keyPath)
	if *tlsOut == "" {
		return nil
	}
	var hosts []string
	for _, h := range strings.Split(*tlsHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	issued, err := natsx.ServerTLS(*keys, *tlsOut, hosts, time.Now())
	if err != nil {
		if errors.Is(err, natsx.ErrInvalidOption) {
			return cli.Usage(fmt.Errorf("--tls-hosts: %w", err))
		}
		return err
	}
	ca, err := os.ReadFile(filepath.Join(*tlsOut, natsx.CAFile))
	if err != nil {
		return err
	}
	if err := cli.WriteFileAtomic(filepath.Join(*out, natsx.CAFile), ca, 0o644); err != nil {
		return err
	}
	state := "kept"
	if issued {
		state = "issued"
	}
	fmt.Printf("nats servers' tls:          %s (%s, %s, %s; certificate %s for %s)\n", *tlsOut, natsx.CAFile, natsx.ServerCertFile, natsx.ServerKeyFile, state, strings.Join(hosts, ", "))
	fmt.Printf("the roles' --nats-tls-ca:   %s\n", filepath.Join(*out, natsx.CAFile))
	return nil
}
