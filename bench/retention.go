package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite" // the "sqlite" driver: dev's store, read beside it

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// The stores the retention benchmark runs on.
const (
	StoreClickHouse = "clickhouse"
	StoreSQLite     = "sqlite"
)

// RetentionConfig says what the retention benchmark runs.
type RetentionConfig struct {
	// Exe is the auditrail binary (its `dev` runs every role, the
	// lifecycle's cycles included).
	Exe string
	// Store: StoreClickHouse (a throwaway server) or StoreSQLite (dev's own).
	Store string
	// Entries of organization A, all expired at once by the retention run.
	Entries int
	// Rate (events/s) published into organization B during both runs; 0:
	// half the capacity measured by publishing into B flat out for
	// CapacityFor.
	Rate        int
	CapacityFor time.Duration
	// Duration of the reference run; the retention run lasts at least as
	// long, and until the expiry is done.
	Duration time.Duration
	// Interval of the lifecycle's cycles (dev --retention-interval).
	Interval time.Duration
}

// DefaultRetentionConfig is what `auditrail-bench --run retention` runs.
func DefaultRetentionConfig(exe string) RetentionConfig {
	return RetentionConfig{Exe: exe, Store: StoreClickHouse, Entries: 10_000_000, CapacityFor: 10 * time.Second,
		Duration: 30 * time.Second, Interval: 2 * time.Second}
}

// RetentionRun is what one run at the fixed rate measured.
type RetentionRun struct {
	Window    time.Duration // publishing
	Published int
	// Stored is the rate at which organization B's events were stored
	// (counted in the store every second; the slope after the first
	// seconds, so that the constant lag of ingest counts in neither run).
	Stored float64
	// MaxBacklog: the most events ingest had yet to store (pending and
	// unacknowledged) at a sample; Drain: from the end of the publishing
	// until ingest had stored everything. LogLag: B's entries stored but
	// not in a signed checkpoint at the end of the publishing; SignDrain:
	// from then until all were.
	MaxBacklog uint64
	Drain      time.Duration
	LogLag     int64
	SignDrain  time.Duration
	// CPU time and peak RSS (VmHWM, reset at the start) of dev and of the
	// ClickHouse server over the window.
	DevCPU, CHCPU         time.Duration
	DevPeakRSS, CHPeakRSS int64
}

// TableCost is what the expiry's mutation did to one ClickHouse table.
type TableCost struct {
	Table                  string
	Mutations              int
	Rewritten, Linked, Unk int   // parts written anew, hard-linked (no row matched), not classified (source gone)
	BytesRewritten         int64 // bytes on disk of the parts written anew
	BytesRead              int64 // bytes on disk of their sources (read whole)
	RowsRemoved            int64 // rows of the source parts minus those of the parts written
}

// MemoryUse is the most memory one query, merge or mutation of the
// ClickHouse server was seen to use (sampled every 250 ms).
type MemoryUse struct {
	What  string
	Bytes int64
}

// RetentionResult holds what the retention benchmark measured.
type RetentionResult struct {
	Store   string
	Entries int
	// Load: organization A's entries published flat out until stored and
	// in a signed checkpoint.
	Load time.Duration
	// Capacity: events/s stored and in a signed checkpoint when published
	// flat out, until the last one was: the better of organization B's
	// flood and organization A's load; CapacityStored: B's stored alone.
	// Rate: what both runs publish, half the capacity. Half of what ingest
	// alone stores is more than the log (the sequencer in dev) takes on
	// this machine: it falls behind, and a record of an expiry waits for
	// it (lifecycle.Config.RecordWait, then the next cycle).
	Capacity, CapacityStored float64
	Rate                     int
	// Reference: the rate for Duration without retention; Retention: the
	// same while the lifecycle expires organization A.
	Reference, Retention RetentionRun
	// The expiry: entries deleted (its record's count); from the PUT of the
	// retention to its plan (the next cycle), from the plan to the start of
	// the deletion (its record signed), the deletion itself, and from the
	// PUT until done; the entries of A in the store before and after it
	// (the lifecycle's records stay).
	Expired                     int64
	ExpiryPlanned, ExpirySigned time.Duration
	ExpiryDelete                time.Duration
	ExpirySincePut              time.Duration
	ABefore, AAfter             int64
	RetentionSetTo              string
	StoreBytesBefore            int64 // ClickHouse: the database's active parts; SQLite: the file and its WAL
	StoreBytesAfter             int64
	BRowsDuringExpiry           int64
	// ClickHouse: the lifecycle's mutations and what each table's cost;
	// the queries, merges and mutations that used the most memory during
	// the retention run.
	Mutations      int
	Tables         []TableCost
	BytesRewritten int64
	Memory         []MemoryUse
}

func (r RetentionResult) storeName() string {
	if r.Store == StoreSQLite {
		return "SQLite"
	}
	return "ClickHouse"
}

// Figures: ingest beside the expiry against the same load without it
// (goal ≥ 0.8×, the issue's); the peak RSS of dev (every role) and of the
// ClickHouse server against the same run without retention (bounded:
// ≤ 1.5×); the expiry's deletion rate against the ingest rate beside it
// (≥ 1×: a retention that deletes slower than the organizations write
// never catches up); on ClickHouse the bytes the mutations wrote against
// the database's size before (≤ 1×: each part rewritten at most once).
func (r RetentionResult) Figures() []Figure {
	p := fmt.Sprintf("retention, %s, %s entries expired", r.storeName(), shortCount(r.Entries))
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	ref := "the same load without retention"
	out := []Figure{
		{Name: p + ": ingest beside the expiry (ev/s)", Value: r.Retention.Stored, Unit: "ev/s", Reference: r.Reference.Stored, RefName: ref, Goal: 0.8},
		{Name: p + ": dev peak RSS (MiB)", Value: mib(r.Retention.DevPeakRSS), Unit: "MiB", Reference: mib(r.Reference.DevPeakRSS), RefName: ref, Goal: 1.5, Lower: true},
	}
	if r.Store == StoreClickHouse {
		out = append(out, Figure{Name: p + ": ClickHouse peak RSS (MiB)", Value: mib(r.Retention.CHPeakRSS), Unit: "MiB",
			Reference: mib(r.Reference.CHPeakRSS), RefName: ref, Goal: 1.5, Lower: true})
	}
	if r.ExpiryDelete > 0 {
		out = append(out, Figure{Name: p + ": expiry (entries deleted/s)", Value: float64(r.Expired) / r.ExpiryDelete.Seconds(), Unit: "rows/s",
			Reference: float64(r.Rate), RefName: "the ingest rate beside it", Goal: 1})
	}
	if r.Store == StoreClickHouse && r.StoreBytesBefore > 0 {
		out = append(out, Figure{Name: p + ": ClickHouse bytes rewritten (MB)", Value: float64(r.BytesRewritten) / 1e6, Unit: "MB",
			Reference: float64(r.StoreBytesBefore) / 1e6, RefName: "the database on disk before", Goal: 1, Lower: true})
	}
	return out
}

// shortCount writes n as 20k, 1M, 1.5M.
func shortCount(n int) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "M"
	case n >= 1000 && n%100 == 0:
		return strconv.FormatFloat(float64(n)/1e3, 'f', -1, 64) + "k"
	}
	return strconv.Itoa(n)
}

// Retention measures the cost of expiring a large organization's trail
// while ingest runs: `auditrail dev` (on a throwaway ClickHouse, or on its
// SQLite store) with short retention cycles; organization A loaded with
// cfg.Entries entries, stored and signed; the ingest capacity measured by
// publishing into organization B flat out; then B receives half of it (or
// cfg.Rate) for cfg.Duration without retention (the reference), and again
// while A's retention expires all its entries (at least as long, and until
// the expiry is done). Ingest, CPU and peak RSS of dev and of the
// ClickHouse server are compared between the two runs; the expiry's time
// and, on ClickHouse, its mutations' cost (parts rewritten or hard-linked,
// bytes written) are reported.
func Retention(ctx context.Context, cfg RetentionConfig, progress io.Writer) (r RetentionResult, err error) {
	if cfg.Exe == "" || cfg.Entries < 1000 || cfg.Rate < 0 || cfg.CapacityFor <= 0 && cfg.Rate == 0 || cfg.Duration <= 0 || cfg.Interval < 100*time.Millisecond ||
		cfg.Store != StoreClickHouse && cfg.Store != StoreSQLite {
		return r, fmt.Errorf("retention benchmark: want a binary, store %s or %s, at least 1000 entries, a rate or a capacity duration, a duration and an interval of at least 100ms, got %+v",
			StoreClickHouse, StoreSQLite, cfg)
	}
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	r.Store, r.Entries = cfg.Store, cfg.Entries
	dir, err := os.MkdirTemp("", "auditrail-bench-retention-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)

	b := &retentionBench{cfg: cfg, say: say}
	if cfg.Store == StoreClickHouse {
		srv, err := chserver.Start(filepath.Join(dir, "clickhouse"))
		if err != nil {
			return r, err
		}
		defer srv.Stop()
		if b.chPID, err = findPID("--config-file=" + filepath.Join(srv.Dir, "config.xml")); err != nil {
			return r, err
		}
		b.dsn = srv.DSN("bench_retention")
	}
	env, err := startFeedDev(ctx, cfg.Exe, filepath.Join(dir, "dev"), b.dsn, "Retention A", "--retention-interval", cfg.Interval.String(),
		"--retention-grace", "0s", "--checkpoint-interval", "1s")
	if err != nil {
		return r, err
	}
	b.env = env
	defer func() {
		env.close()
		if err != nil {
			err = fmt.Errorf("%w; dev's log ends:\n%s", err, tail(env.dev.out.String(), 3000))
		}
	}()
	if b.orgB, err = env.dev.createOrg(ctx, "Retention B"); err != nil {
		return r, err
	}
	if cfg.Store == StoreClickHouse {
		b.store, err = openCHProbe(b.dsn)
	} else {
		b.store, err = openSQLiteProbe(filepath.Join(env.dev.data, "audit.db"))
	}
	if err != nil {
		return r, err
	}
	defer b.store.close()
	// Before the load: a store that keeps no lifecycle has nothing to measure.
	if _, _, err := b.store.expiry(ctx, env.org); err != nil {
		return r, fmt.Errorf("this build's %s store keeps no lifecycle (its expiries cannot be read): %w", r.storeName(), err)
	}
	return r, b.run(ctx, &r)
}

// retentionBench is one run of the retention benchmark.
type retentionBench struct {
	cfg   RetentionConfig
	say   func(string, ...any)
	env   *feedDev // dev, organization A (env.org) and a publisher
	orgB  uuid.UUID
	store retentionProbe
	chPID int    // the ClickHouse server's process (0 on SQLite)
	dsn   string // the ClickHouse database ("" on SQLite)
}

func (b *retentionBench) run(ctx context.Context, r *RetentionResult) error {
	cfg, say, dev := b.cfg, b.say, b.env.dev
	orgA := b.env.org

	// 1. Organization A: its entries, 30 days of them, flat out.
	say("publishing %d entries of organization A (30 days of timestamps) through dev's ingest (%s), flat out", cfg.Entries, r.storeName())
	t0 := time.Now()
	from := t0.Add(-30 * 24 * time.Hour)
	step := 30 * 24 * time.Hour / time.Duration(cfg.Entries)
	if _, err := publishFlat(ctx, b.env.pub, orgA, cfg.Entries, 0, func(i int) time.Time { return from.Add(time.Duration(i) * step) }); err != nil {
		return err
	}
	say("published in %s", time.Since(t0).Round(time.Millisecond))
	if err := b.waitStored(ctx, 10*time.Minute+time.Duration(cfg.Entries/1000)*time.Second); err != nil {
		return err
	}
	loaded := time.Now()
	n, err := b.store.count(ctx, orgA)
	if err != nil {
		return err
	}
	if n < int64(cfg.Entries) {
		return fmt.Errorf("organization A holds %d entries in the store after ingest caught up, want %d", n, cfg.Entries)
	}
	// The sequencer appends the load's leaves after ingest stored them
	// (about 14k leaves/s here: 8.35M of 10M signed 10 minutes after the
	// store caught up): the wait grows with the load.
	if err := b.waitSigned(ctx, orgA, n, 10*time.Minute+time.Duration(cfg.Entries/5000)*time.Second); err != nil {
		return err
	}
	r.Load = time.Since(t0)
	say("organization A: %d entries stored and signed in %s (%.0f/s)", n, r.Load.Round(time.Millisecond), rate(int(n), r.Load))
	if err := b.settle(ctx); err != nil {
		return err
	}

	// 2. The capacity: organization B flat out.
	r.Rate = cfg.Rate
	if r.Rate == 0 {
		say("capacity: publishing into organization B flat out for %s", cfg.CapacityFor)
		before, err := b.store.count(ctx, b.orgB)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := publishFlat(ctx, b.env.pub, b.orgB, 0, cfg.CapacityFor, func(int) time.Time { return time.Now() }); err != nil {
			return err
		}
		if err := b.waitStored(ctx, 10*time.Minute); err != nil {
			return err
		}
		stored := time.Since(t0)
		after, err := b.store.count(ctx, b.orgB)
		if err != nil {
			return err
		}
		if err := b.waitSigned(ctx, b.orgB, after, 10*time.Minute); err != nil {
			return err
		}
		signed := time.Since(t0)
		// Signed: the better of this flood and A's load (a flood of the
		// same pipeline, far longer at large sizes): the checkpoints of a
		// short flood were seen to wait tens of seconds once.
		flood := rate(int(after-before), signed)
		r.CapacityStored, r.Capacity = rate(int(after-before), stored), min(rate(int(after-before), stored), max(flood, rate(int(n), r.Load)))
		r.Rate = max(1, int(r.Capacity/2))
		say("capacity: %d events stored in %s (%.0f/s, publishing included), in a signed checkpoint in %s (%.0f/s; organization A's load: %.0f/s); both runs publish %d events/s",
			after-before, stored.Round(time.Millisecond), r.CapacityStored, signed.Round(time.Millisecond), flood, rate(int(n), r.Load), r.Rate)
		if err := b.settle(ctx); err != nil {
			return err
		}
	}

	// 3. The reference: the rate, no retention.
	say("reference: %d events/s into organization B for %s, no retention", r.Rate, cfg.Duration)
	if r.Reference, err = b.load(ctx, r.Rate, cfg.Duration, nil, nil); err != nil {
		return fmt.Errorf("reference run: %w", err)
	}
	b.report("without retention", r.Reference)
	if err := b.settle(ctx); err != nil {
		return err
	}

	// 4. The same while A's retention expires all its entries. The
	// retention is as long as the time since A's entries were stored,
	// less a second: all of them expire, and the entries written since
	// (this PUT's own audit event) not before the run ends, when the
	// retention is set back to keep forever: one expiry to measure.
	var cost *chCost
	if chp, ok := b.store.(*chProbe); ok {
		cost = newCHCost(chp.conn)
		if err := cost.poll(ctx); err != nil {
			return err
		}
		if r.StoreBytesBefore, _, err = cost.size(ctx); err != nil {
			return err
		}
	} else {
		r.StoreBytesBefore = fileSizes(filepath.Join(dev.data, "audit.db"), filepath.Join(dev.data, "audit.db-wal"))
	}
	if r.ABefore, err = b.store.count(ctx, orgA); err != nil {
		return err
	}
	bBefore, err := b.store.count(ctx, b.orgB)
	if err != nil {
		return err
	}
	keep := max(time.Second, (time.Since(loaded) - time.Second).Truncate(time.Second))
	r.RetentionSetTo = strconv.Itoa(int(keep/time.Second)) + "s"
	say("retention: organization A's retention set to %s (all its %d entries older), %d events/s into organization B for at least %s and until the expiry is done",
		r.RetentionSetTo, r.ABefore, r.Rate, cfg.Duration)
	put := time.Now()
	if err := b.setRetention(ctx, orgA, r.RetentionSetTo); err != nil {
		return err
	}
	var doneAt, dropAt, countedAt time.Time
	var exp expiryState
	until := func(ctx context.Context) (bool, error) {
		if !doneAt.IsZero() {
			return true, nil
		}
		if dropAt.IsZero() && time.Since(countedAt) >= time.Second {
			// When A's entries start to go (SQLite: a step of the deletion;
			// ClickHouse: its entries' mutation, the third of six).
			countedAt = time.Now()
			n, err := b.store.count(ctx, orgA)
			if err != nil {
				return false, err
			}
			if n < r.ABefore {
				dropAt = countedAt
			}
		}
		e, ok, err := b.store.expiry(ctx, orgA)
		if err != nil || !ok || !e.done {
			return false, err
		}
		doneAt, exp = time.Now(), e
		say("expiry done after %s: %d entries", doneAt.Sub(put).Round(time.Millisecond), e.expired)
		return true, b.setRetention(ctx, orgA, "")
	}
	var watch func(context.Context) error
	if cost != nil {
		watch = cost.watch
	}
	if r.Retention, err = b.load(ctx, r.Rate, cfg.Duration, until, watch); err != nil {
		return fmt.Errorf("retention run: %w", err)
	}
	b.report("with retention", r.Retention)
	r.Expired, r.ExpirySincePut, r.ExpiryPlanned = exp.expired, doneAt.Sub(put), exp.planned.Sub(put)
	// The deletion starts with the first mutation (ClickHouse), or when the
	// first entries are gone (SQLite: its first step, within a second):
	// before it, the record of the expiry waits for a signed checkpoint.
	started := dropAt
	if cost != nil {
		if err := cost.poll(ctx); err != nil {
			return err
		}
		if t := cost.firstMutation(); !t.IsZero() {
			started = t
		}
	}
	if started.IsZero() || started.After(doneAt) {
		started = doneAt
	}
	r.ExpirySigned = started.Sub(exp.planned)
	r.ExpiryDelete = doneAt.Sub(started)
	if r.AAfter, err = b.store.count(ctx, orgA); err != nil {
		return err
	}
	bAfter, err := b.store.count(ctx, b.orgB)
	if err != nil {
		return err
	}
	r.BRowsDuringExpiry = bAfter - bBefore
	// What the listing shows of A: the lifecycle's records, and no more
	// entries than the store holds.
	listed, err := walkList(ctx, dev, "/api/v1/orgs/"+orgA.String()+"/audit_logs?limit=100")
	if err != nil {
		return err
	}
	if r.AAfter > 10 || listed > 10 {
		return fmt.Errorf("organization A still holds %d entries in the store (%d listed) after its expiry of %d", r.AAfter, listed, r.Expired)
	}
	if cost != nil {
		if err := cost.finish(ctx); err != nil {
			return err
		}
		if r.StoreBytesAfter, _, err = cost.size(ctx); err != nil {
			return err
		}
		r.Tables, r.Mutations, r.BytesRewritten = cost.tables()
		r.Memory = cost.top(5)
	} else {
		r.StoreBytesAfter = fileSizes(filepath.Join(dev.data, "audit.db"), filepath.Join(dev.data, "audit.db-wal"))
	}
	r.print(say)
	return nil
}

// report prints one run.
func (b *retentionBench) report(name string, run RetentionRun) {
	line := fmt.Sprintf("%s: %s, %d published (%.0f/s), stored %.0f/s, backlog max %d, stored %s after, %d not yet signed then, signed %s after; dev CPU %.1f s, peak RSS %d MiB",
		name, run.Window.Round(time.Millisecond), run.Published, rate(run.Published, run.Window), run.Stored, run.MaxBacklog,
		run.Drain.Round(time.Millisecond), run.LogLag, run.SignDrain.Round(time.Millisecond), run.DevCPU.Seconds(), run.DevPeakRSS>>20)
	if b.chPID != 0 {
		line += fmt.Sprintf("; ClickHouse CPU %.1f s, peak RSS %d MiB", run.CHCPU.Seconds(), run.CHPeakRSS>>20)
	}
	b.say("%s", line)
}

// print writes the summary of the result.
func (r RetentionResult) print(say func(string, ...any)) {
	ref, ret := r.Reference, r.Retention
	say("ingest beside the expiry: %.0f events/s stored against %.0f without retention (ratio %.2f, goal >= 0.8); %d events/s asked, capacity %.0f/s (stored and signed; stored alone %.0f/s)",
		ret.Stored, ref.Stored, ret.Stored/ref.Stored, r.Rate, r.Capacity, r.CapacityStored)
	say("peak RSS: dev %d MiB with retention, %d MiB without", ret.DevPeakRSS>>20, ref.DevPeakRSS>>20)
	perSec := func(d, w time.Duration) float64 { return d.Seconds() / w.Seconds() }
	say("CPU per second of run: dev %.2f with retention, %.2f without", perSec(ret.DevCPU, ret.Window), perSec(ref.DevCPU, ref.Window))
	if r.Store == StoreClickHouse {
		say("ClickHouse server: peak RSS %d MiB with retention, %d MiB without; CPU %.1f s in %s (%.2f/s) with retention, %.1f s in %s (%.2f/s) without",
			ret.CHPeakRSS>>20, ref.CHPeakRSS>>20, ret.CHCPU.Seconds(), ret.Window.Round(time.Second), perSec(ret.CHCPU, ret.Window),
			ref.CHCPU.Seconds(), ref.Window.Round(time.Second), perSec(ref.CHCPU, ref.Window))
	}
	if r.ExpiryDelete > 0 {
		say("expiry: %d entries (retention %s) deleted in %s (%.0f entries/s); done %s after the PUT: planned after %s, its record signed %s later, then the deletion; organization A: %d entries before, %d after",
			r.Expired, r.RetentionSetTo, r.ExpiryDelete.Round(time.Millisecond), float64(r.Expired)/r.ExpiryDelete.Seconds(),
			r.ExpirySincePut.Round(time.Millisecond), r.ExpiryPlanned.Round(time.Millisecond), r.ExpirySigned.Round(time.Millisecond), r.ABefore, r.AAfter)
	}
	if r.Store == StoreSQLite {
		say("SQLite file (with its WAL): %.1f MB before the expiry, %.1f MB after (organization B wrote %d entries meanwhile)",
			float64(r.StoreBytesBefore)/1e6, float64(r.StoreBytesAfter)/1e6, r.BRowsDuringExpiry)
		return
	}
	var parts, rewritten, linked, unk int
	var read int64
	for _, t := range r.Tables {
		parts += t.Rewritten + t.Linked + t.Unk
		rewritten, linked, unk, read = rewritten+t.Rewritten, linked+t.Linked, unk+t.Unk, read+t.BytesRead
	}
	say("ClickHouse deletion: %d mutations over %d parts: %d rewritten (%.1f MB read, %.1f MB written), %d hard-linked (no row matched)%s; the database %.1f MB on disk before, %.1f MB after (organization B wrote %d entries meanwhile)",
		r.Mutations, parts, rewritten, float64(read)/1e6, float64(r.BytesRewritten)/1e6, linked, unknownParts(unk), float64(r.StoreBytesBefore)/1e6,
		float64(r.StoreBytesAfter)/1e6, r.BRowsDuringExpiry)
	for _, t := range r.Tables {
		say("  %-16s %d mutation(s): %d parts rewritten (%.1f MB read, %.1f MB written, %d rows fewer), %d hard-linked%s", t.Table, t.Mutations, t.Rewritten,
			float64(t.BytesRead)/1e6, float64(t.BytesRewritten)/1e6, t.RowsRemoved, t.Linked, unknownParts(t.Unk))
	}
	for _, m := range r.Memory {
		say("ClickHouse memory: %6.1f MiB  %s", float64(m.Bytes)/(1<<20), m.What)
	}
}

func unknownParts(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d not classified (their source part was gone)", n)
}

// setRetention PUTs the audit log retention of org ("": keep forever).
func (b *retentionBench) setRetention(ctx context.Context, org uuid.UUID, keep string) error {
	var v any
	if keep != "" {
		v = keep
	}
	res, err := b.env.dev.do(ctx, "PUT", "/api/v1/orgs/"+org.String()+"/retention", map[string]any{"audit_logs": v})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		body, _ := io.ReadAll(res.Body)
		return fmt.Errorf("PUT retention %q: %d %s", keep, res.StatusCode, body)
	}
	return nil
}

// waitStored waits until dev's ingest has stored every audit event
// published (its consumer has none pending or unacknowledged).
func (b *retentionBench) waitStored(ctx context.Context, within time.Duration) error {
	t0, last := time.Now(), time.Now()
	for {
		backlog, err := ingestBacklog(ctx, b.env.js)
		if err == nil && backlog == 0 {
			return nil
		}
		if time.Since(t0) > within {
			return fmt.Errorf("ingest did not catch up in %s (%d events left, %v)", within, backlog, err)
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			b.say("  %d events left to store", backlog)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ingestBacklog is the number of audit events dev's ingest has yet to
// store: pending and unacknowledged.
func ingestBacklog(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	c, err := js.Consumer(ctx, schemas.StreamEvents, ingest.DefaultConfig().Durable)
	if err != nil {
		return 0, err
	}
	info := c.CachedInfo()
	return info.NumPending + uint64(info.NumAckPending), nil
}

// waitSigned waits until a signed checkpoint of org's audit log covers
// size leaves.
func (b *retentionBench) waitSigned(ctx context.Context, org uuid.UUID, size int64, within time.Duration) error {
	t0, last := time.Now(), time.Now()
	for {
		got, err := b.signedSize(ctx, org)
		if err == nil && got >= size {
			return nil
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			b.say("  %d entries left to sign", size-got)
		}
		if time.Since(t0) > within {
			return fmt.Errorf("no signed checkpoint of %d leaves in %s (the latest: %d; %v)", size, within, got, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// settle waits until organization B's events are stored and in a signed
// checkpoint, and for ClickHouse's background merges: a pipeline at rest
// before each measurement.
func (b *retentionBench) settle(ctx context.Context) error {
	if err := b.waitStored(ctx, 10*time.Minute); err != nil {
		return err
	}
	n, err := b.store.count(ctx, b.orgB)
	if err != nil {
		return err
	}
	if err := b.waitSigned(ctx, b.orgB, n, 10*time.Minute); err != nil {
		return err
	}
	if b.dsn != "" {
		return waitMerges(ctx, b.dsn, 5*time.Minute, b.say)
	}
	return nil
}

// signedSize is the size of the latest signed checkpoint of org's audit
// log (0 without one).
func (b *retentionBench) signedSize(ctx context.Context, org uuid.UUID) (int64, error) {
	res, err := b.env.dev.do(ctx, "GET", "/api/v1/orgs/"+org.String()+"/audit_logs/checkpoint", nil)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	switch res.StatusCode {
	case 404:
		return 0, nil
	case 200:
	default:
		return 0, fmt.Errorf("checkpoint: %d %s", res.StatusCode, body)
	}
	var env struct {
		Data struct {
			Size int64 `json:"size"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	return env.Data.Size, nil
}

// load publishes rate events/s into organization B for at least d and
// until until answers true (called every 250 ms, nil: none), while it
// samples what is stored every second; watch, when set, is called every
// 250 ms.
func (b *retentionBench) load(ctx context.Context, rate int, d time.Duration, until func(context.Context) (bool, error),
	watch func(context.Context) error) (RetentionRun, error) {
	var run RetentionRun
	procs := []int{b.env.dev.cmd.Process.Pid}
	if b.chPID != 0 {
		procs = append(procs, b.chPID)
	}
	cpu0 := make([]time.Duration, len(procs))
	for i, pid := range procs {
		if err := clearPeakRSS(pid); err != nil {
			return run, err
		}
		var err error
		if cpu0[i], err = procCPU(pid); err != nil {
			return run, err
		}
	}
	type sample struct {
		at time.Duration
		n  int64
	}
	count0, err := b.store.count(ctx, b.orgB)
	if err != nil {
		return run, err
	}
	samples := []sample{{0, count0}}

	stop := make(chan struct{})
	published := make(chan error, 1)
	var sent atomic.Int64
	start := time.Now()
	go func() {
		gen := synth.New(b.orgB, 3, uint64(start.UnixNano()))
		const tick = 50 * time.Millisecond
		per := max(1, rate*int(tick/time.Millisecond)/1000)
		for next := start; ; next = next.Add(tick) {
			select {
			case <-stop:
				published <- nil
				return
			case <-time.After(time.Until(next)):
			}
			evs := make([]producers.Event, per)
			for i := range evs {
				e := gen.Event(time.Now())
				evs[i] = &e
			}
			if err := b.env.pub.PublishBatch(ctx, evs); err != nil {
				published <- fmt.Errorf("publish: %w", err)
				return
			}
			sent.Add(int64(per))
		}
	}()
	stopPublishing := func() error {
		close(stop)
		return <-published
	}
	limit := 10*time.Minute + time.Duration(b.cfg.Entries/2000)*time.Second + d
	untilDone := until == nil
	var lastSample time.Time
	for {
		select {
		case <-ctx.Done():
			_ = stopPublishing()
			return run, ctx.Err()
		case err := <-published:
			published <- err
			_ = stopPublishing()
			return run, err
		case <-time.After(250 * time.Millisecond):
		}
		if !untilDone {
			if untilDone, err = until(ctx); err != nil {
				_ = stopPublishing()
				return run, err
			}
		}
		if time.Since(lastSample) >= time.Second {
			lastSample = time.Now()
			n, err := b.store.count(ctx, b.orgB)
			if err != nil {
				_ = stopPublishing()
				return run, err
			}
			samples = append(samples, sample{time.Since(start), n})
			if backlog, err := ingestBacklog(ctx, b.env.js); err == nil {
				run.MaxBacklog = max(run.MaxBacklog, backlog)
			}
		}
		if watch != nil {
			if err := watch(ctx); err != nil {
				_ = stopPublishing()
				return run, err
			}
		}
		el := time.Since(start)
		if el >= d && untilDone {
			break
		}
		if el > limit {
			_ = stopPublishing()
			return run, fmt.Errorf("the expiry was not done after %s", limit)
		}
	}
	if err := stopPublishing(); err != nil {
		return run, err
	}
	run.Window, run.Published = time.Since(start), int(sent.Load())
	n, err := b.store.count(ctx, b.orgB)
	if err != nil {
		return run, err
	}
	samples = append(samples, sample{run.Window, n})
	for i, pid := range procs {
		cpu, err := procCPU(pid)
		if err != nil {
			return run, err
		}
		peak, err := procStatus(pid, "VmHWM")
		if err != nil {
			return run, err
		}
		if i == 0 {
			run.DevCPU, run.DevPeakRSS = cpu-cpu0[i], peak
		} else {
			run.CHCPU, run.CHPeakRSS = cpu-cpu0[i], peak
		}
	}
	// The slope after the first seconds (the lag of ingest behind the
	// publisher, constant at a steady rate, counts in neither run), fitted
	// by least squares: ingest stores in batches, so the count at any one
	// sample is off by up to a batch.
	skip := min(5*time.Second, run.Window/4)
	var xs, ys []float64
	for _, s := range samples {
		if s.at >= skip {
			xs, ys = append(xs, s.at.Seconds()), append(ys, float64(s.n))
		}
	}
	if len(xs) < 2 {
		xs, ys = []float64{0, run.Window.Seconds()}, []float64{float64(samples[0].n), float64(n)}
	}
	run.Stored = slope(xs, ys)
	signed, err := b.signedSize(ctx, b.orgB)
	if err != nil {
		return run, err
	}
	run.LogLag = max(0, n-signed)
	t0 := time.Now()
	if err := b.waitStored(ctx, 10*time.Minute); err != nil {
		return run, err
	}
	run.Drain = time.Since(t0)
	if n, err = b.store.count(ctx, b.orgB); err != nil {
		return run, err
	}
	if err := b.waitSigned(ctx, b.orgB, n, 10*time.Minute); err != nil {
		return run, err
	}
	run.SignDrain = time.Since(t0)
	return run, nil
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// publishFlat publishes events of org as fast as the stream takes them,
// from two goroutines in batches of 5000: n of them (timestamps at(i)),
// or for d when n is 0. It answers how many it published.
func publishFlat(ctx context.Context, pub *producers.Publisher, org uuid.UUID, n int, d time.Duration, at func(i int) time.Time) (int, error) {
	const batch = 5000
	var next atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := synth.New(org, 5, uint64(time.Now().UnixNano())+uint64(g))
			for ctx.Err() == nil {
				lo := int(next.Add(batch)) - batch
				size := batch
				if n > 0 {
					size = min(batch, n-lo)
				} else if time.Now().After(deadline) {
					next.Add(-batch)
					return
				}
				if size <= 0 {
					return
				}
				evs := make([]producers.Event, size)
				for j := range evs {
					e := gen.Event(at(lo + j))
					evs[j] = &e
				}
				if err := pub.PublishBatch(ctx, evs); err != nil {
					errs <- fmt.Errorf("publish: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if n > 0 {
		return n, nil
	}
	return int(next.Load()), nil
}

// expiryState is the newest expiry of an organization's audit log.
type expiryState struct {
	done    bool
	expired int64
	planned time.Time // the plan's time (its record's)
}

// retentionProbe reads what the benchmark measures straight from dev's
// store, beside dev.
type retentionProbe interface {
	// count is the number of audit entries of org in the store.
	count(ctx context.Context, org uuid.UUID) (int64, error)
	// expiry is the newest expiry of org's audit log (false: none yet).
	expiry(ctx context.Context, org uuid.UUID) (expiryState, bool, error)
	close()
}

// chProbe reads a ClickHouse store.
type chProbe struct{ conn driver.Conn }

func openCHProbe(dsn string) (*chProbe, error) {
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, err
	}
	return &chProbe{conn: conn}, nil
}

func (p *chProbe) count(ctx context.Context, org uuid.UUID) (int64, error) {
	var n uint64
	if err := p.conn.QueryRow(ctx, "SELECT count() FROM audit_logs WHERE organization_id = ?", org.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the entries of %s: %w", org, err)
	}
	return int64(n), nil
}

func (p *chProbe) expiry(ctx context.Context, org uuid.UUID) (expiryState, bool, error) {
	rows, err := p.conn.Query(ctx, "SELECT done, expired, time_ms FROM log_expiries WHERE organization_id = ? AND kind = 0 ORDER BY record_leaf DESC, ver DESC LIMIT 1", org.String())
	if err != nil {
		return expiryState{}, false, fmt.Errorf("read log_expiries: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return expiryState{}, false, rows.Err()
	}
	var (
		done   uint8
		e      expiryState
		timeMS int64
	)
	if err := rows.Scan(&done, &e.expired, &timeMS); err != nil {
		return e, false, fmt.Errorf("read log_expiries: %w", err)
	}
	e.done, e.planned = done != 0, time.UnixMilli(timeMS)
	return e, true, rows.Err()
}

func (p *chProbe) close() { p.conn.Close() }

// sqliteProbe reads dev's SQLite file, read-only.
type sqliteProbe struct{ db *sql.DB }

func openSQLiteProbe(path string) (*sqliteProbe, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &sqliteProbe{db: db}, nil
}

func (p *sqliteProbe) count(ctx context.Context, org uuid.UUID) (int64, error) {
	var n int64
	if err := p.db.QueryRowContext(ctx, "SELECT count(*) FROM audit_logs WHERE organization_id = ?", org.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the entries of %s: %w", org, err)
	}
	return n, nil
}

func (p *sqliteProbe) expiry(ctx context.Context, org uuid.UUID) (expiryState, bool, error) {
	var (
		e      expiryState
		done   int64
		timeMS int64
	)
	err := p.db.QueryRowContext(ctx, `SELECT e.done, e.expired, e.time_ms FROM log_expiries e JOIN log_heads h ON h.log_id = e.log_id
		WHERE h.organization_id = ? AND h.kind = 0 ORDER BY e.record_leaf DESC LIMIT 1`, org.String()).Scan(&done, &e.expired, &timeMS)
	if errors.Is(err, sql.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("read log_expiries: %w", err)
	}
	e.done, e.planned = done != 0, time.UnixMilli(timeMS)
	return e, true, nil
}

func (p *sqliteProbe) close() { p.db.Close() }

// chCost follows the lifecycle's mutations of a ClickHouse database
// (system.mutations: those whose command carries the lifecycle's run tag)
// and the parts each wrote (system.parts, active or not, of the
// mutation's data version): a part of the same blocks and level as its
// source is the mutation's output, written anew when its files are not
// the source's (18.16 hard-links a part in which no row matches).
type chCost struct {
	conn      driver.Conn
	mutations map[string]mutation  // table/mutation_id
	parts     map[string]*partCost // table/name of the parts the mutations wrote
	memory    map[string]int64     // the most memory seen of each query, merge or mutation
	polled    time.Time
}

type mutation struct {
	table   string
	version int64 // the data version of the parts it writes (-1: unknown)
	created time.Time
	done    bool
}

type partCost struct {
	table       string
	rewritten   bool
	known       bool
	bytes       int64
	srcBytes    int64
	rowsRemoved int64
}

type partRow struct {
	table, name, partition, path string
	min, max, version            int64
	level                        uint32
	rows, bytes                  uint64
}

func newCHCost(conn driver.Conn) *chCost {
	return &chCost{conn: conn, mutations: map[string]mutation{}, parts: map[string]*partCost{}, memory: map[string]int64{}}
}

// watch samples the memory of the server's queries, merges and
// mutations, and polls the mutations and parts every second.
func (c *chCost) watch(ctx context.Context) error {
	rows, err := c.conn.Query(ctx, "SELECT query, toInt64(peak_memory_usage) FROM system.processes WHERE position(query, 'system.processes') = 0")
	if err != nil {
		return fmt.Errorf("system.processes: %w", err)
	}
	for rows.Next() {
		var (
			q string
			n int64
		)
		if err := rows.Scan(&q, &n); err != nil {
			rows.Close()
			return fmt.Errorf("system.processes: %w", err)
		}
		q = strings.Join(strings.Fields(q), " ")
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		c.memory["query "+q] = max(c.memory["query "+q], n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("system.processes: %w", err)
	}
	mrows, err := c.conn.Query(ctx, "SELECT table, result_part_name, toInt64(memory_usage) FROM system.merges WHERE database = currentDatabase()")
	if err != nil {
		return fmt.Errorf("system.merges: %w", err)
	}
	for mrows.Next() {
		var (
			table, part string
			n           int64
		)
		if err := mrows.Scan(&table, &part, &n); err != nil {
			mrows.Close()
			return fmt.Errorf("system.merges: %w", err)
		}
		what := "merge of " + table
		for _, m := range c.mutations {
			if m.table == table && m.version >= 0 && strings.HasSuffix(part, "_"+strconv.FormatInt(m.version, 10)) {
				what = "mutation of " + table
			}
		}
		c.memory[what] = max(c.memory[what], n)
	}
	mrows.Close()
	if err := mrows.Err(); err != nil {
		return fmt.Errorf("system.merges: %w", err)
	}
	if time.Since(c.polled) < time.Second {
		return nil
	}
	return c.poll(ctx)
}

// top is the n largest uses of memory seen.
func (c *chCost) top(n int) []MemoryUse {
	var out []MemoryUse
	for what, b := range c.memory {
		out = append(out, MemoryUse{What: what, Bytes: b})
	}
	slices.SortFunc(out, func(a, b MemoryUse) int { return int(b.Bytes - a.Bytes) })
	return out[:min(n, len(out))]
}

// poll reads the mutations and classifies the parts written since.
func (c *chCost) poll(ctx context.Context) error {
	c.polled = time.Now()
	rows, err := c.conn.Query(ctx, `SELECT table, mutation_id, create_time, is_done FROM system.mutations
		WHERE database = currentDatabase() AND position(command, 'lifecycle ') > 0`)
	if err != nil {
		return fmt.Errorf("system.mutations: %w", err)
	}
	versions := map[string][]int64{}
	for rows.Next() {
		var (
			table, id string
			created   time.Time
			done      uint8
		)
		if err := rows.Scan(&table, &id, &created, &done); err != nil {
			rows.Close()
			return fmt.Errorf("system.mutations: %w", err)
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(id, "mutation_"), ".txt"), 10, 64)
		if err != nil {
			v = -1
		}
		c.mutations[table+"/"+id] = mutation{table: table, version: v, created: created, done: done != 0}
		if v >= 0 {
			versions[table] = append(versions[table], v)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("system.mutations: %w", err)
	}
	if len(versions) == 0 {
		return nil
	}
	prows, err := c.conn.Query(ctx, `SELECT table, name, partition_id, path, min_block_number, max_block_number, toInt64(data_version), level, rows, bytes_on_disk
		FROM system.parts WHERE database = currentDatabase()`)
	if err != nil {
		return fmt.Errorf("system.parts: %w", err)
	}
	defer prows.Close()
	var parts []partRow
	for prows.Next() {
		var p partRow
		if err := prows.Scan(&p.table, &p.name, &p.partition, &p.path, &p.min, &p.max, &p.version, &p.level, &p.rows, &p.bytes); err != nil {
			return fmt.Errorf("system.parts: %w", err)
		}
		parts = append(parts, p)
	}
	if err := prows.Err(); err != nil {
		return fmt.Errorf("system.parts: %w", err)
	}
	for _, p := range parts {
		key := p.table + "/" + p.name
		if c.parts[key] != nil || p.version <= p.max || !slices.Contains(versions[p.table], p.version) {
			continue
		}
		// Its source: the same blocks and level, the highest version below.
		var src *partRow
		for i := range parts {
			s := &parts[i]
			if s.table == p.table && s.partition == p.partition && s.min == p.min && s.max == p.max && s.level == p.level &&
				s.version < p.version && (src == nil || s.version > src.version) {
				src = s
			}
		}
		pc := &partCost{table: p.table, bytes: int64(p.bytes)}
		if src != nil {
			pc.srcBytes = int64(src.bytes)
		}
		if src != nil {
			a, errA := os.Stat(filepath.Join(p.path, "checksums.txt"))
			b, errB := os.Stat(filepath.Join(src.path, "checksums.txt"))
			if errA == nil && errB == nil {
				pc.known, pc.rewritten = true, !os.SameFile(a, b)
				pc.rowsRemoved = int64(src.rows) - int64(p.rows)
			}
		}
		c.parts[key] = pc
	}
	return nil
}

// finish waits until every lifecycle mutation is done, and polls a last
// time.
func (c *chCost) finish(ctx context.Context) error {
	for t0 := time.Now(); ; {
		if err := c.poll(ctx); err != nil {
			return err
		}
		done := true
		for _, m := range c.mutations {
			done = done && m.done
		}
		if done {
			return nil
		}
		if time.Since(t0) > 10*time.Minute {
			return errors.New("the lifecycle's mutations were not done 10 minutes after its expiry")
		}
		time.Sleep(time.Second)
	}
}

// firstMutation is when the first lifecycle mutation was made (to the
// second), zero when none was.
func (c *chCost) firstMutation() time.Time {
	var first time.Time
	for _, m := range c.mutations {
		if first.IsZero() || m.created.Before(first) {
			first = m.created
		}
	}
	return first
}

// size is the bytes on disk and rows of the database's active parts.
func (c *chCost) size(ctx context.Context) (int64, int64, error) {
	var b, n uint64
	if err := c.conn.QueryRow(ctx, "SELECT sum(bytes_on_disk), sum(rows) FROM system.parts WHERE database = currentDatabase() AND active").Scan(&b, &n); err != nil {
		return 0, 0, fmt.Errorf("system.parts: %w", err)
	}
	return int64(b), int64(n), nil
}

// tables sums the costs by table, in the order the mutations were made.
func (c *chCost) tables() ([]TableCost, int, int64) {
	by := map[string]*TableCost{}
	var order []string
	ms := make([]mutation, 0, len(c.mutations))
	for _, m := range c.mutations {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b mutation) int { return int(a.version - b.version) })
	for _, m := range ms {
		t := by[m.table]
		if t == nil {
			t = &TableCost{Table: m.table}
			by[m.table] = t
			order = append(order, m.table)
		}
		t.Mutations++
	}
	var total int64
	for _, p := range c.parts {
		t := by[p.table]
		switch {
		case !p.known:
			t.Unk++
		case p.rewritten:
			t.Rewritten++
			t.BytesRewritten += p.bytes
			t.BytesRead += p.srcBytes
			t.RowsRemoved += p.rowsRemoved
			total += p.bytes
		default:
			t.Linked++
		}
	}
	out := make([]TableCost, 0, len(order))
	for _, name := range order {
		out = append(out, *by[name])
	}
	return out, len(c.mutations), total
}

// fileSizes is the sum of the sizes of the files that exist.
func fileSizes(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// findPID finds the process whose command line holds arg (a server this
// process started, whose handle it does not have).
func findPID(arg string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(b), "\x00"), arg) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process with %s in its command line", arg)
}

// procCPU is the user and system CPU time of a process so far
// (/proc/<pid>/stat, in clock ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time: %w", err)
	}
	// After the command's name in parentheses: state is field 3, utime 14,
	// stime 15.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("CPU time: /proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// procStatus reads a size field (VmRSS, VmHWM) of a process's status, in
// bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read /proc/%d/status: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// clearPeakRSS makes a process's VmHWM start again from its current RSS.
func clearPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
