// Package receive is `auditrail receive`: a receiver of push deliveries that verifies signatures.
package receive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/tlog"
)

// Run is a receiver of push deliveries: it verifies their
// signatures, dedups their events by event_id and counts them (a line per
// delivery on stdout; GET /counts and GET /events).
func Run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail receive")
	secret := fs.String("secret", "", "", "the destination's secret: every POST must carry a valid Auditrail-Signature (required unless --splunk-token)")
	splunk := fs.String("splunk-token", "", "", "act as Splunk HEC: require Authorization: Splunk <token>")
	listen := fs.String("listen", "", "127.0.0.1:9000", "listener")
	tolerance := fs.Duration("tolerance", "", deliver.DefaultTolerance, "how far a signature's time may be from this clock")
	maxBody := fs.Int("max-body", "", deliver.DefaultMaxReceiveBody, "largest body taken, in bytes (413 above)")
	window := fs.Int("dedup-window", "", deliver.DefaultDedupWindow, "how many distinct event ids are remembered to tell duplicates (the last first received; memory stays bounded)")
	verify := fs.Bool("verify", "", false, "verify each JSON batch's proof (its checkpoint against --keys, every entry's inclusion, and that no leaf between batches is missing): a line per batch (verified, gap, duplicate, fail)")
	keysFile := fs.String("keys", "", "", "with --verify: the public keys checkpoints must be signed by (the answer of GET /api/v1/audit_keys saved to a file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" && *splunk == "" {
		return cli.UsageErrorf("--secret is required (the secret of the destination)")
	}
	if *window < 1 {
		return cli.UsageErrorf("--dedup-window must be at least 1")
	}
	cfg := deliver.ReceiverConfig{Secret: []byte(*secret), SplunkToken: *splunk, Tolerance: *tolerance,
		MaxBody: int64(*maxBody), DedupWindow: *window, Log: os.Stdout}
	switch {
	case *verify && *keysFile == "":
		return cli.UsageErrorf("--verify needs --keys FILE: the public keys you trust (GET /api/v1/audit_keys saved once)")
	case !*verify && *keysFile != "":
		return cli.UsageErrorf("--keys is for --verify")
	case *verify:
		b, err := os.ReadFile(*keysFile)
		if err != nil {
			return fmt.Errorf("--keys: %w", err)
		}
		ks, err := tlog.ParseKeySet(b)
		if err != nil {
			return cli.Usage(fmt.Errorf("--keys %s: %w", *keysFile, err))
		}
		cfg.Keys = &ks
	}
	r, err := deliver.NewReceiver(cfg)
	if err != nil {
		return cli.Usage(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	fmt.Fprintf(os.Stdout, "auditrail receive: listening on http://%s (POST deliveries; GET /counts, GET /events)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	c := r.Counts()
	fmt.Fprintf(os.Stdout, "auditrail receive: deliveries=%d events=%d unique=%d duplicates=%d rejected=%d\n", c.Deliveries, c.Events, c.Unique, c.Duplicates, c.Rejected)
	if cfg.Keys != nil {
		fmt.Fprintf(os.Stdout, "auditrail receive: batches verified=%d gaps=%d leaf_duplicates=%d proof_failures=%d unproven=%d\n", c.Verified, c.Gaps, c.LeafDuplicate, c.ProofFailures, c.Unproven)
	}
	return nil
}
