package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/tlogtest"
	"github.com/auditrail/auditrail/internal/tlog/verify"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// VerifyResult is what the verify benchmark measured.
type VerifyResult struct {
	Entries   int
	FileBytes int64
	Workers   int
	// Verify is the best of the runs of the offline verifier over the
	// file; Decode the best of the reference runs.
	Verify, Decode time.Duration
	// AllocBytes and Allocs are what one verification allocated; CPU the
	// process's CPU time (user and system) during it: on a shared machine
	// Entries/CPU.Seconds() × cores is what idle cores would give.
	AllocBytes, Allocs uint64
	CPU                time.Duration
}

// Figures is the verification rate beside the reference.
func (r VerifyResult) Figures() []Figure {
	return []Figure{{Name: fmt.Sprintf("verify %d exported entries (entries/s)", r.Entries), Value: rate(r.Entries, r.Verify), Unit: "entries/s",
		Reference: rate(r.Entries, r.Decode), RefName: "read + encoding/json into apiitem.Item, same workers", Goal: 1, Min: 500_000}}
}

// VerifyRuns is how many times each side runs; the best run counts (the
// machine may be shared).
const VerifyRuns = 2

// Verify writes n generated audit entries (internal/synth events rendered
// as apiitem.Item, each with its leaf_index, the last line the signed
// checkpoint) to a JSONL file in a temporary directory and measures the
// offline verifier over it (auditrail verify --export: parse, canonicalize
// and hash every line on every core, place the leaves, recompute the root),
// against the floor any verifier pays: reading the file and decoding every
// line into a apiitem.Item with encoding/json on as many workers.
func Verify(ctx context.Context, n int, w io.Writer) (VerifyResult, error) {
	r := VerifyResult{Entries: n, Workers: runtime.GOMAXPROCS(0)}
	dir, err := os.MkdirTemp("", "auditrail-bench-verify-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "export.jsonl")
	key, pub, err := tlog.GenerateKey("bench.auditrail", time.Now().Add(-time.Hour))
	if err != nil {
		return r, err
	}
	keys, err := tlog.NewKeySet(pub)
	if err != nil {
		return r, err
	}
	start := time.Now()
	if r.FileBytes, err = writeVerifyExport(path, n, key); err != nil {
		return r, err
	}
	fmt.Fprintf(w, "  wrote %d entries (%.0f MB) in %s\n", n, float64(r.FileBytes)/1e6, time.Since(start).Round(time.Millisecond))
	for range VerifyRuns {
		d, err := timeDecode(path, r.Workers)
		if err != nil {
			return r, err
		}
		if r.Decode == 0 || d < r.Decode {
			r.Decode = d
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cpu0 := cpuTime()
		d, err = timeVerify(ctx, path, keys, int64(n))
		cpu := cpuTime() - cpu0
		runtime.ReadMemStats(&after)
		if err != nil {
			return r, err
		}
		if r.Verify == 0 || d < r.Verify {
			r.Verify, r.CPU = d, cpu
			r.AllocBytes, r.Allocs = after.TotalAlloc-before.TotalAlloc, after.Mallocs-before.Mallocs
		}
	}
	return r, nil
}

// writeVerifyExport writes the export: workers render chunks of entries
// (the lines are in chunk order, which the verifier does not need to be
// leaf order), then the checkpoint line.
func writeVerifyExport(path string, n int, key tlog.PrivateKey) (int64, error) {
	const chunk = 8192
	org := uuid.New()
	leaves := make([]tlog.Hash, n)
	type part struct{ buf []byte }
	parts := make(chan part, 4)
	next := make(chan int, (n+chunk-1)/chunk)
	for c := 0; c*chunk < n; c++ {
		next <- c
	}
	close(next)
	var wg sync.WaitGroup
	var genErr error
	var mu sync.Mutex
	base := time.Now().Add(-24 * time.Hour)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range next {
				g := synth.New(org, 3, uint64(c)+1)
				var buf []byte
				for i := c * chunk; i < min(n, (c+1)*chunk); i++ {
					ts := base.Add(time.Duration(i) * time.Millisecond)
					ev := g.Event(ts)
					e := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: ts}
					item, err := json.Marshal(apiitem.NewItem(&e))
					if err == nil {
						var en tlog.Entry
						en, err = tlog.ParseEntry(nil, item)
						leaves[i] = en.Leaf
					}
					if err != nil {
						mu.Lock()
						genErr = err
						mu.Unlock()
						return
					}
					buf = append(append(buf, tlogtest.Line(item, int64(i))...), '\n')
				}
				parts <- part{buf}
			}
		})
	}
	go func() { wg.Wait(); close(parts) }()
	f, err := os.Create(path)
	if err != nil {
		for range parts {
		}
		return 0, err
	}
	defer f.Close()
	var size int64
	var werr error
	for p := range parts {
		if werr == nil {
			_, werr = f.Write(p.buf)
			size += int64(len(p.buf))
		}
	}
	if genErr != nil {
		return 0, genErr
	}
	if werr != nil {
		return 0, werr
	}
	note, err := tlogtest.Sign(leaves, int64(n), tlog.Origin("bench.auditrail", org, tlog.KindAudit), time.Now(), key)
	if err != nil {
		return 0, err
	}
	line := append(tlogtest.CheckpointLine(note), '\n')
	if _, err := f.Write(line); err != nil {
		return 0, err
	}
	return size + int64(len(line)), f.Close()
}

func timeVerify(ctx context.Context, path string, keys tlog.KeySet, n int64) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	rep, err := verify.Export(ctx, f, verify.Config{Keys: keys})
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if !rep.OK() || rep.Checkpoint.Size != n {
		var b bytes.Buffer
		rep.Write(&b)
		return 0, fmt.Errorf("the generated export does not verify:\n%s", b.String())
	}
	return d, nil
}

// timeDecode reads the file and decodes every entry line into a
// apiitem.Item on workers goroutines.
func timeDecode(path string, workers int) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	blocks := make(chan []byte, workers*2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var decErr error
	for range workers {
		wg.Go(func() {
			for b := range blocks {
				for len(b) > 0 {
					line := b
					if i := bytes.IndexByte(b, '\n'); i >= 0 {
						line, b = b[:i], b[i+1:]
					} else {
						b = nil
					}
					if bytes.HasPrefix(line, []byte(`{"checkpoint"`)) {
						continue
					}
					var it apiitem.Item
					if err := json.Unmarshal(line, &it); err != nil {
						mu.Lock()
						decErr = err
						mu.Unlock()
						continue
					}
				}
			}
		})
	}
	rd := bufio.NewReaderSize(f, 1<<20)
	var carry []byte
	for {
		buf := make([]byte, 1<<20)
		k, err := io.ReadFull(rd, buf)
		buf = append(carry, buf[:k]...)
		if err != nil {
			if len(buf) > 0 {
				blocks <- buf
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			close(blocks)
			wg.Wait()
			return 0, err
		}
		cut := bytes.LastIndexByte(buf, '\n') + 1
		carry = append([]byte(nil), buf[cut:]...)
		blocks <- buf[:cut]
	}
	close(blocks)
	wg.Wait()
	d := time.Since(start)
	if decErr != nil {
		return 0, decErr
	}
	return d, nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
