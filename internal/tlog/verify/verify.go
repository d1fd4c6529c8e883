// Package verify checks an exported log offline: the JSONL export of an
// organization's audit entries or tool executions (each line an entry with
// its leaf_index, the last line possibly the covering checkpoint) against
// a signed checkpoint and the public keys, and optionally against a
// checkpoint kept from earlier. It is the engine of `auditrail verify
// --export`; everything it finds is a Problem that says what is wrong
// where.
package verify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/auditrail/auditrail/internal/tlog"
)

// ErrNoCheckpoint: no checkpoint was given and the export does not end
// with one.
var ErrNoCheckpoint = errors.New("verify: no checkpoint: the export does not end with one, give one")

// Config is what Export checks against.
type Config struct {
	// Keys are the trusted public keys (the audit_keys answer).
	Keys tlog.KeySet
	// Checkpoint is a signed checkpoint of the log; when nil, the export's
	// last line must carry one.
	Checkpoint []byte
	// Since is a signed checkpoint kept from earlier (optional): the log
	// must extend it.
	Since []byte
	// Workers parse and hash lines in parallel (default GOMAXPROCS).
	Workers int
	// MaxProblems bounds the problems listed (default
	// DefaultMaxProblems); the rest are counted.
	MaxProblems int
	// PendingGrace: an entry exported with leaf_index null (not sequenced
	// yet) is reported, not verified, when its created_time is at most
	// this much before the checkpoint's timestamp or after it; older, it
	// should be in the log and is a problem (KindInserted). 0:
	// DefaultPendingGrace.
	PendingGrace time.Duration
	// Witnesses are the witnesses' keys whose cosignatures count, and
	// WitnessQuorum how many of them must have cosigned the checkpoint
	// verified against (0 with no witnesses: none required).
	Witnesses     []tlog.WitnessKey
	WitnessQuorum int
}

// DefaultPendingGrace is Config.PendingGrace's default: well above the
// sequencing delay (the sequencer follows ingest within seconds, a
// checkpoint is signed at least every minute while entries arrive).
const DefaultPendingGrace = 5 * time.Minute

// DefaultMaxProblems is Config.MaxProblems's default.
const DefaultMaxProblems = 50

// Problem kinds.
const (
	KindMalformed    = "malformed"      // a line that is not an entry
	KindCheckpoint   = "checkpoint"     // a checkpoint that does not open (key, signature, format)
	KindMissing      = "missing"        // a leaf index without an entry
	KindDuplicate    = "duplicate"      // a leaf index claimed by several entries
	KindRoot         = "root"           // the entries do not hash to the checkpoint's root
	KindRolledBack   = "rolled_back"    // the kept checkpoint is larger than the log's
	KindInconsistent = "inconsistent"   // the log does not extend the kept checkpoint
	KindOrder        = "misplaced_line" // the checkpoint line is not the last line
	KindInserted     = "inserted"       // an entry not in the log, stored well before the checkpoint
	KindAltered      = "altered"        // an entry whose inclusion proof does not verify (found online, Report.Add)
	KindWitness      = "witness"        // too few witnesses cosigned the checkpoint, or a cosignature is forged
)

// Problem is one thing found wrong.
type Problem struct {
	Kind    string
	Leaf    int64 // -1 when not about one leaf
	Line    int   // 1-based line of the export, 0 when not about one line
	Message string
}

// Report is the outcome of Export.
type Report struct {
	// Checkpoint is the checkpoint verified against, Key the key that
	// signed it (zero when it did not open).
	Checkpoint tlog.Checkpoint
	Key        tlog.PublicKey
	// Since is the kept checkpoint, when one was given and opened.
	Since *tlog.Checkpoint
	// Cosigned names the witnesses given whose cosignatures on the
	// checkpoint verify.
	Cosigned []string
	// Lines and Entries count the export's non-empty lines and entries.
	Lines, Entries int64
	// Newer counts the entries at leaf_index >= the checkpoint's size
	// (appended after it): reported, not verified. NewerFirst is the
	// smallest such index.
	Newer      int64
	NewerFirst int64
	// Pending counts the entries exported with leaf_index null (not
	// sequenced yet when exported) within Config.PendingGrace of the
	// checkpoint or after it: reported, not verified.
	Pending int64
	// RootVerified: every leaf 0..size-1 has one entry and they hash to
	// the checkpoint's root (every entry below its size is the log's).
	RootVerified bool
	// Unchecked counts the entries below the checkpoint's size that no
	// root could be computed over (leaves missing or claimed twice, and
	// no smaller checkpoint covering them matched): an altered one among
	// them cannot be named from the export alone. Online, the inclusion
	// proofs check them (then 0).
	Unchecked int64
	// Notes are further findings that are not problems, one a line.
	Notes    []string
	Problems []Problem
	// MoreProblems counts the problems beyond MaxProblems.
	MoreProblems int
	maxProblems  int
}

// OK reports whether everything verified.
func (r *Report) OK() bool { return len(r.Problems) == 0 && r.MoreProblems == 0 }

// Add records a problem found apart from Export (online: an entry whose
// inclusion proof does not verify), in leaf order, within MaxProblems (the
// rest are counted).
func (r *Report) Add(p Problem) {
	if len(r.Problems) >= cmp.Or(r.maxProblems, DefaultMaxProblems) {
		r.MoreProblems++
		return
	}
	r.Problems = append(r.Problems, p)
	sortProblems(r.Problems)
}

func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if c := cmp.Compare(a.Leaf, b.Leaf); c != 0 {
			return c
		}
		return cmp.Compare(a.Line, b.Line)
	})
}

// record is what is kept of one entry: 56 bytes, no pointers. off is
// where its line starts, to read its event_id again when a problem names
// it.
type record struct {
	leaf  tlog.Hash
	index int64
	line  int64
	off   int64
}

// pendingLine is an entry exported with leaf_index null.
type pendingLine struct {
	line    int64
	event   string
	created time.Time // zero when the entry has no readable created_time
}

type checkpointLine struct {
	line int64
	note []byte
}

// collector gathers the workers' results.
type collector struct {
	mu          sync.Mutex
	records     [][]record
	problems    []Problem
	checkpoints []checkpointLine
	lifecycle   []lifecycleLine
	erased      []erasedLine
	pending     []pendingLine
	morePending int64 // pending entries beyond maxLineProblems, counted only
	lines       int64
	entries     int64
	lastLine    int64
	dropped     int64 // problems of lines beyond maxLineProblems, counted only
}

// maxLineProblems bounds the line problems kept in memory (a file of
// garbage has one per line).
const maxLineProblems = 10_000

// Export reads the export from r and verifies it (see the package comment).
// It returns an error only when it cannot verify at all (reading fails,
// no checkpoint); what it finds wrong is in the report.
func Export(ctx context.Context, r io.Reader, cfg Config) (*Report, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.MaxProblems <= 0 {
		cfg.MaxProblems = DefaultMaxProblems
	}
	col := &collector{}
	var ra io.ReaderAt
	if x, ok := r.(io.ReaderAt); ok {
		ra = x
	}
	if err := scan(ctx, r, cfg.Workers, col); err != nil {
		return nil, err
	}
	rep := &Report{Lines: col.lines, Entries: col.entries, Problems: col.problems, NewerFirst: -1, maxProblems: cfg.MaxProblems}
	v := &verifier{cfg: cfg, rep: rep, col: col, ra: ra}
	if err := v.run(); err != nil {
		return nil, err
	}
	sortProblems(rep.Problems)
	rep.MoreProblems = int(col.dropped)
	if len(rep.Problems) > cfg.MaxProblems {
		rep.MoreProblems += len(rep.Problems) - cfg.MaxProblems
		rep.Problems = rep.Problems[:cfg.MaxProblems]
	}
	return rep, nil
}

// block is a run of whole lines of the input.
type block struct {
	data      []byte
	firstLine int64 // 1-based number of its first line
	off       int64 // offset of data in the input
}

const blockSize = 1 << 20

// scan splits the input into blocks of whole lines and has cfg.Workers
// goroutines parse them.
func scan(ctx context.Context, r io.Reader, workers int, col *collector) error {
	blocks := make(chan block, workers*2)
	free := make(chan []byte, workers*2+2)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var buf []byte
			for b := range blocks {
				buf = parseBlock(b, buf, col)
				select {
				case free <- b.data[:0]:
				default:
				}
			}
		})
	}
	err := split(ctx, r, blocks, free)
	close(blocks)
	wg.Wait()
	return err
}

// split reads r into blocks that end at a newline. A line longer than
// tlog.MaxEntryBytes ends the scan with an error naming it.
func split(ctx context.Context, r io.Reader, blocks chan<- block, free chan []byte) error {
	var carry []byte
	line, off := int64(1), int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(carry) > tlog.MaxEntryBytes {
			return fmt.Errorf("verify: line %d is longer than %d bytes: not an export entry", line, tlog.MaxEntryBytes)
		}
		var buf []byte
		select {
		case buf = <-free:
		default:
			buf = make([]byte, 0, blockSize+tlog.MaxEntryBytes)
		}
		buf = append(buf[:0], carry...)
		n, err := io.ReadAtLeast(r, buf[len(buf):len(buf)+blockSize], 1)
		buf = buf[:len(buf)+n]
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return fmt.Errorf("verify: read the export: %w", err)
		}
		cut := bytes.LastIndexByte(buf, '\n') + 1
		if eof {
			cut = len(buf)
		}
		if cut == 0 && len(buf) > tlog.MaxEntryBytes {
			return fmt.Errorf("verify: line %d is longer than %d bytes: not an export entry", line, tlog.MaxEntryBytes)
		}
		if cut > 0 {
			carry = append(carry[:0], buf[cut:]...)
			data := buf[:cut]
			blocks <- block{data: data, firstLine: line, off: off}
			line += int64(bytes.Count(data, []byte{'\n'}))
			off += int64(cut)
		} else {
			carry = append(carry[:0], buf...)
		}
		if eof {
			return nil
		}
	}
}

// parseBlock parses the lines of b, adding its entries to col as one
// slice (sized by the block's line count: no growing of large slices).
func parseBlock(b block, buf []byte, col *collector) []byte {
	local := make([]record, 0, bytes.Count(b.data, []byte{'\n'})+1)
	var lines, entries int64
	var problems []Problem
	var cps []checkpointLine
	var lifes []lifecycleLine
	var erased []erasedLine
	var pending []pendingLine
	last := int64(0)
	line, off := b.firstLine, b.off
	data := b.data
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n')
		var text []byte
		lineOff := off
		if n < 0 {
			text, data = data, nil
		} else {
			text, data = data[:n], data[n+1:]
			off += int64(n + 1)
		}
		text = bytes.TrimRight(text, "\r")
		if len(bytes.TrimSpace(text)) == 0 {
			line++
			continue
		}
		lines++
		last = line
		e, err := parseLine(buf[:0], text)
		buf = e.Canonical[:0:cap(e.Canonical)]
		switch {
		case err != nil:
			problems = append(problems, Problem{Kind: KindMalformed, Leaf: -1, Line: int(line),
				Message: fmt.Sprintf("line %d is not an entry of the export: %s", line, strings.TrimPrefix(err.Error(), "tlog: "))})
		case e.Pending:
			pending = append(pending, pendingOf(e, line))
		case e.LeafIndex < 0:
			if note, ok := checkpointOf(e, text); ok {
				cps = append(cps, checkpointLine{line: line, note: note})
				break
			}
			if member, raw, ok := lifecycleOf(e, text); ok {
				lifes = append(lifes, lifecycleLine{line: line, member: member, raw: append(json.RawMessage(nil), raw...)})
				break
			}
			problems = append(problems, Problem{Kind: KindMalformed, Leaf: -1, Line: int(line),
				Message: fmt.Sprintf("line %d%s has no leaf_index: it was not exported as an entry of the log (inserted?)", line, eventSuffix(e.EventID()))})
		default:
			leaf := e.Leaf
			if e.Uncovered > 0 && bytes.Contains(text, []byte(`"`+tlog.ErasureMember+`"`)) {
				ref, h, ok, err := erasureOf(text)
				switch {
				case err != nil:
					problems = append(problems, Problem{Kind: KindMalformed, Leaf: e.LeafIndex, Line: int(line),
						Message: fmt.Sprintf("line %d: its %s member is malformed: %s", line, tlog.ErasureMember, err)})
				case ok && e.Version == 2 && e.Leaf != h:
					// Its committed fields are opened: the fields the
					// erasure did not replace hash to its leaf, unless
					// one of them was changed.
					problems = append(problems, Problem{Kind: KindAltered, Leaf: e.LeafIndex, Line: int(line),
						Message: fmt.Sprintf("line %d%s: a field that erasure %s did not replace was altered: the entry no longer hashes to its leaf %d", line, eventSuffix(e.EventID()), ref.ID, e.LeafIndex)})
					leaf = h
				case ok:
					leaf = h
					erased = append(erased, erasedLine{line: line, index: e.LeafIndex, erasure: ref.ID, committed: e.Version == 2, fields: e.Erased})
				}
			}
			entries++
			local = append(local, record{leaf: leaf, index: e.LeafIndex, line: line, off: lineOff})
		}
		line++
	}
	col.mu.Lock()
	col.lines += lines
	col.entries += entries
	if keep := max(0, maxLineProblems-len(col.problems)); len(problems) > keep {
		col.dropped += int64(len(problems) - keep)
		problems = problems[:keep]
	}
	col.problems = append(col.problems, problems...)
	col.checkpoints = append(col.checkpoints, cps...)
	col.lifecycle = append(col.lifecycle, lifes...)
	col.erased = append(col.erased, erased...)
	if keep := max(0, maxLineProblems-len(col.pending)); len(pending) > keep {
		col.morePending += int64(len(pending) - keep)
		pending = pending[:keep]
	}
	col.pending = append(col.pending, pending...)
	col.lastLine = max(col.lastLine, last)
	if len(local) > 0 {
		col.records = append(col.records, local)
	}
	col.mu.Unlock()
	return buf
}

// parseLine is tlog.ParseEntry, with a panic turned into an error (the
// input is hostile; a bug must not take the verifier down).
func parseLine(buf, text []byte) (e tlog.Entry, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, err = tlog.Entry{Canonical: buf}, fmt.Errorf("internal error reading the line: %v", p)
		}
	}()
	e, err = tlog.ParseEntry(buf, text)
	if err != nil {
		e.Canonical = buf
	}
	return e, err
}

// pendingOf reads the event id and created_time of an entry exported
// with leaf_index null.
func pendingOf(e tlog.Entry, line int64) pendingLine {
	p := pendingLine{line: line, event: e.EventID()}
	var v struct {
		CreatedTime string `json:"created_time"`
	}
	if json.Unmarshal(e.Canonical, &v) == nil {
		if t, err := time.Parse(time.RFC3339Nano, v.CreatedTime); err == nil {
			p.created = t
		}
	}
	return p
}

// checkpointOf returns the note of a line {"checkpoint": "<note>"}: one
// member, which no leaf covers.
func checkpointOf(e tlog.Entry, text []byte) ([]byte, bool) {
	if e.Members != 0 || e.Uncovered != 1 {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(text, &m) != nil || len(m) != 1 {
		return nil, false
	}
	var s string
	if raw, ok := m["checkpoint"]; !ok || json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

func eventSuffix(id string) string {
	if id == "" {
		return ""
	}
	return " (event " + strconv.Quote(id) + ")"
}

// Write prints the report: one line per problem, then a verdict line.
func (r *Report) Write(w io.Writer) {
	for _, p := range r.Problems {
		fmt.Fprintf(w, "FAIL: %s\n", p.Message)
	}
	if r.MoreProblems > 0 {
		fmt.Fprintf(w, "FAIL: and %d more %s\n", r.MoreProblems, strings.TrimPrefix(plural(int64(r.MoreProblems), "problem"), strconv.Itoa(r.MoreProblems)+" "))
	}
	cp := r.Checkpoint
	if r.Newer > 0 {
		fmt.Fprintf(w, "note: %s (from leaf %d) newer than the checkpoint: not verified\n", plural(r.Newer, "entry"), r.NewerFirst)
	}
	if r.Pending > 0 {
		fmt.Fprintf(w, "note: %s not sequenced yet when exported (leaf_index null): not verified\n", plural(r.Pending, "entry"))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.Unchecked > 0 {
		fmt.Fprintf(w, "note: %s below the checkpoint's size could not be checked: with leaves missing or claimed twice no root can be computed over them, so an entry altered among them cannot be named from the export alone (verifying online checks each entry's inclusion proof)\n",
			plural(r.Unchecked, "entry"))
	}
	if !r.OK() {
		fmt.Fprintf(w, "NOT VERIFIED: %s in %s\n", plural(int64(len(r.Problems)+r.MoreProblems), "problem"), plural(r.Lines, "line"))
		return
	}
	what := fmt.Sprintf("%s (leaves 0..%d) match", plural(cp.Size, "entry"), cp.Size-1)
	if cp.Size == 0 {
		what = "the log is empty, as"
	}
	fmt.Fprintf(w, "OK: %s the checkpoint of %s: size %d, root %s, at %s, signed by key %s (%s)\n",
		what, cp.Origin, cp.Size, cp.Root, cp.Time.Format(tlog.TimeFormat), r.Key.KeyID, r.Key.Name)
	if r.Since != nil {
		fmt.Fprintf(w, "OK: the log extends the kept checkpoint of %s (size %d)\n", r.Since.Time.Format(tlog.TimeFormat), r.Since.Size)
	}
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") {
		return strconv.FormatInt(n, 10) + " " + strings.TrimSuffix(word, "y") + "ies"
	}
	return strconv.FormatInt(n, 10) + " " + word + "s"
}
