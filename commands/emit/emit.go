// Package emit is `auditrail emit`: publish synthetic audit events.
package emit

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	"golang.org/x/term"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func Run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail emit")
	nf := cli.AddNATSFlags(fs, "nats://127.0.0.1:4222", false)
	orgFlag := fs.String("org", "", "", "organization UUID of the events (default: a new scratch organization, so that no real trail gets synthetic events)")
	count := fs.Int("count", "", 1000, "number of events")
	rate := fs.Float("rate", "", 0, "events per second (0: as fast as the stream acknowledges)")
	projects := fs.Int("projects", "", 3, "number of projects the events spread over")
	batch := fs.Int("batch", "", 10000, "events per publish batch")
	mkLog := fs.LogFlags("text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	var org uuid.UUID
	scratch := *orgFlag == "" || *orgFlag == "new"
	if scratch {
		org = uuid.New()
	} else if org, err = uuid.Parse(*orgFlag); err != nil {
		return cli.UsageErrorf("--org %q is not a UUID", *orgFlag)
	}
	if *count < 1 || *batch < 1 || *rate < 0 || *projects < 0 {
		return cli.UsageErrorf("--count and --batch must be at least 1; --rate and --projects not negative")
	}
	if scratch {
		fmt.Fprintf(os.Stderr, "emit: %d synthetic events into a new scratch organization %s (readable by the platform admin; --org sends them elsewhere)\n", *count, org)
	} else {
		fmt.Fprintf(os.Stderr, "emit: WARNING: %d SYNTHETIC events go into the audit trail of organization %s and stay there (a trail cannot be edited); leave out --org for a scratch organization\n", *count, org)
	}
	nc, err := nf.Connect("auditrail-emit", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cli.WaitStreams(wctx, nc, log, schemas.StreamEvents); err != nil {
		return fmt.Errorf("%w (is the platform up? its controlplane creates the streams)", err)
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), log)
	if err != nil {
		return err
	}
	gen := synth.New(org, *projects, uint64(time.Now().UnixNano()))
	chunk := *batch
	if *rate > 0 {
		chunk = max(1, min(chunk, int(*rate/10)))
	}
	prog := newProgress(os.Stderr, *count)
	start := time.Now()
	sent := 0
	for sent < *count {
		n := min(chunk, *count-sent)
		evs := make([]producers.Event, n)
		now := time.Now()
		for i := range evs {
			ev := gen.Event(now)
			evs[i] = &ev
		}
		if err := pub.PublishBatch(ctx, evs); err != nil {
			prog.done(sent)
			return fmt.Errorf("after %d events: %w", sent, err)
		}
		sent += n
		prog.update(sent)
		if *rate > 0 {
			due := start.Add(time.Duration(float64(sent) / *rate * float64(time.Second)))
			select {
			case <-ctx.Done():
				prog.done(sent)
				return fmt.Errorf("interrupted after %d events: %w", sent, ctx.Err())
			case <-time.After(time.Until(due)):
			}
		}
	}
	prog.done(sent)
	el := time.Since(start)
	fmt.Printf("emitted %d events for org %s in %s (%.0f events/s)\n", sent, org, el.Round(time.Millisecond), float64(sent)/el.Seconds())
	return nil
}

// progress shows count, rate and ETA on a terminal (rewriting one line), or
// a line a second elsewhere.
type progress struct {
	w     io.Writer
	total int
	tty   bool
	start time.Time
	last  time.Time
}

func newProgress(w *os.File, total int) *progress {
	return &progress{w: w, total: total, tty: term.IsTerminal(int(w.Fd())), start: time.Now()}
}

func (p *progress) line(n int) string {
	el := time.Since(p.start).Seconds()
	rate := float64(n) / max(el, 1e-9)
	eta := "-"
	if rate > 0 && n < p.total {
		eta = (time.Duration(float64(p.total-n)/rate) * time.Second).Round(time.Second).String()
	}
	return fmt.Sprintf("%d/%d events (%.0f%%)  %.0f/s  eta %s", n, p.total, 100*float64(n)/float64(p.total), rate, eta)
}

func (p *progress) update(n int) {
	every := time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", p.line(n))
	} else {
		fmt.Fprintln(p.w, p.line(n))
	}
}

func (p *progress) done(n int) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", p.line(n))
	}
}
