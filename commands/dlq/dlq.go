// Package dlq is `auditrail dlq list|replay`: review and replay dead letters.
package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/schemas"
)

// Run reviews and replays dead letters: `auditrail dlq list` and
// `auditrail dlq replay`, with the admin NATS credentials.
func Run(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay" && args[0] != "-h" && args[0] != "--help") {
		return cli.UsageErrorf("dlq: list or replay (auditrail dlq list -h)")
	}
	sub := args[0]
	if sub == "-h" || sub == "--help" {
		fmt.Fprint(os.Stdout, "usage: auditrail dlq list|replay [flags]\n\n  list    the dead letters of AUDITRAIL_DLQ: sequence, time, original subject, reason\n  replay  publish dead letters again to their original subjects (after fixing the cause), then remove them from the DLQ\n")
		return nil
	}
	fs := cli.NewFlags("auditrail dlq " + sub)
	nf := cli.AddNATSFlags(fs, "nats://127.0.0.1:4222", false)
	orgFlag := fs.String("org", "", "", "only the dead letters of this organization")
	seqFlag := fs.String("seq", "", "", "only these DLQ sequences, comma-separated (list shows them)")
	var format *string
	var limit *int
	var all, dryRun *bool
	if sub == "list" {
		format = fs.String("format", "", "table", "table or json (one dead letter per line)")
		limit = fs.Int("limit", "", 100, "at most this many (0: all)")
	} else {
		all = fs.Bool("all", "", false, "replay every dead letter that --org selects (without --seq)")
		dryRun = fs.Bool("dry-run", "", false, "say what would be replayed, replay nothing")
	}
	mkLog := fs.LogFlags("text")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	var f ingest.DeadLetterFilter
	if *orgFlag != "" {
		if f.Org, err = uuid.Parse(*orgFlag); err != nil {
			return cli.UsageErrorf("--org %q is not a UUID", *orgFlag)
		}
	}
	if *seqFlag != "" {
		f.Seqs = map[uint64]bool{}
		for _, s := range strings.Split(*seqFlag, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil || n == 0 {
				return cli.UsageErrorf("--seq: %q is not a DLQ sequence", s)
			}
			f.Seqs[n] = true
		}
	}
	if sub == "list" && *format != "table" && *format != "json" {
		return cli.UsageErrorf("--format: table or json")
	}
	if sub == "replay" && !*all && len(f.Seqs) == 0 {
		return cli.UsageErrorf("replay: name the dead letters with --seq (see auditrail dlq list), or pass --all")
	}
	nc, err := nf.Connect("auditrail-dlq", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	n := 0
	if sub == "list" {
		n = *limit
	}
	dead, err := ingest.ListDeadLetters(lctx, js, f, n)
	if err != nil {
		return err
	}
	if sub == "list" {
		return printDeadLetters(os.Stdout, dead, *format)
	}
	return replayDeadLetters(lctx, os.Stdout, js, dead, f, *dryRun)
}

func printDeadLetters(w io.Writer, dead []ingest.DeadLetter, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		for _, d := range dead {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		return nil
	}
	if len(dead) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tSUBJECT\tBYTES\tREASON")
	for _, d := range dead {
		reason := d.Reason
		if len(reason) > 120 {
			reason = reason[:117] + "..."
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", d.Seq, d.Time.Format(time.RFC3339), d.Subject, d.Bytes, reason)
	}
	return tw.Flush()
}

func replayDeadLetters(ctx context.Context, w io.Writer, js jetstream.JetStream, dead []ingest.DeadLetter, f ingest.DeadLetterFilter, dryRun bool) error {
	for seq := range f.Seqs {
		found := false
		for _, d := range dead {
			found = found || d.Seq == seq
		}
		if !found {
			return fmt.Errorf("DLQ sequence %d: no such dead letter%s", seq, map[bool]string{true: " of that organization", false: ""}[f.Org != uuid.Nil])
		}
	}
	replayed, skipped := 0, 0
	for _, d := range dead {
		if d.Org == "" {
			fmt.Fprintf(w, "skipped %d: original subject %q is not an event subject\n", d.Seq, d.Subject)
			skipped++
			continue
		}
		if dryRun {
			fmt.Fprintf(w, "would replay %d to %s (%s)\n", d.Seq, d.Subject, d.Reason)
			replayed++
			continue
		}
		if err := ingest.ReplayDeadLetter(ctx, js, d); err != nil {
			return fmt.Errorf("%w (%d replayed before it)", err, replayed)
		}
		fmt.Fprintf(w, "replayed %d to %s\n", d.Seq, d.Subject)
		replayed++
	}
	verb := "replayed"
	if dryRun {
		verb = "would replay"
	}
	fmt.Fprintf(w, "%s %d dead letter(s), skipped %d; a message that fails again returns to %s with its new reason\n", verb, replayed, skipped, schemas.StreamDLQ)
	return nil
}
