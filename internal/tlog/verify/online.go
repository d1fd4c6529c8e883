package verify

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/apiclient"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/internal/tlog"
)

// Online is what `auditrail verify --url` checks.
type Online struct {
	base, key string
	org       uuid.UUID
	route     string // audit_logs or tool_executions
	// Pinned are the keys of --keys; nil: trust those the server lists.
	Pinned *tlog.KeySet
	// Since is a kept checkpoint (optional): the log must extend it.
	Since []byte
	// Save is where to write the verified checkpoint (optional).
	Save string
	// Grace is Config.PendingGrace.
	Grace time.Duration
	// MaxExport is the largest export taken, in bytes.
	MaxExport int64
	// Wait is how long to wait for a checkpoint that covers the newest
	// entry listed (0: verify against the latest checkpoint at once).
	Wait time.Duration
	// Witnesses and WitnessQuorum are Config's.
	Witnesses     []tlog.WitnessKey
	WitnessQuorum int
	client        *http.Client
}

// httpTimeout bounds each small request; the export is bounded by
// its own (long) timeout and by --max-export-bytes.
const (
	httpTimeout           = 30 * time.Second
	exportTimeout         = 6 * time.Hour
	maxAnswer             = 1 << 20
	DefaultMaxExportBytes = 8 << 30
)

// trustWarning is printed first when the keys are the server's own, and
// trustVerdict after an OK.
const (
	trustWarning = "WARNING: --trust-server-keys: the checkpoint is checked against the keys this server lists, not keys you pinned: this shows that the log is consistent with itself, not that it is authentic (a server that rewrote its log and signed it with a new key passes); pin the keys with --keys FILE"
	trustVerdict = "WARNING: --trust-server-keys: consistent with the keys the server lists, not authenticated by keys you pinned"
)

// Run verifies an organization's log through the API: the latest
// checkpoint against the pinned keys (or, with --trust-server-keys, the
// server's), the whole JSONL export (verified as offline), the inclusion
// proof of each entry when the root cannot be confirmed, and, with a kept
// checkpoint, the consistency proof from it.
func (o *Online) Run(ctx context.Context, stdout io.Writer) error {
	o.client = apiclient.NoRedirect(0) // each request has its own timeout
	ks, err := o.keys(ctx, stdout)
	if err != nil {
		return err
	}
	if o.Wait > 0 {
		o.waitCovered(ctx, stdout)
	}
	cpRaw, err := o.get(ctx, "/api/v1/orgs/"+o.org.String()+"/"+o.route+"/checkpoint")
	var ae *apiclient.Error
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return fmt.Errorf("the log has no checkpoint yet: nothing to verify (%s)", ae.Msg)
	}
	if err != nil {
		return err
	}
	var cpData struct {
		Note string `json:"note"`
	}
	if err := json.Unmarshal(cpRaw, &cpData); err != nil || cpData.Note == "" {
		return fmt.Errorf("the checkpoint route answered no note: %.200s", cpRaw)
	}
	note := []byte(cpData.Note)
	cp, _, err := tlog.Open(note, ks)
	if err != nil {
		o.checkpointFailed(ctx, note, err, stdout)
		return errors.New("not verified")
	}
	if _, org, _, ok := tlog.ParseOrigin(cp.Origin); !ok || org != o.org {
		fmt.Fprintf(stdout, "FAIL: the latest checkpoint is of another log (origin %q)\n", cp.Origin)
		return errors.New("not verified")
	}
	consistent := o.checkConsistency(ctx, ks, cp, stdout)
	f, err := os.CreateTemp("", "auditrail-verify-*.jsonl")
	if err != nil {
		return fmt.Errorf("temporary export file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := o.export(ctx, f); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("temporary export file: %w", err)
	}
	rep, err := Export(ctx, f, Config{Keys: ks, Checkpoint: note, Since: o.Since, PendingGrace: o.Grace,
		Witnesses: o.Witnesses, WitnessQuorum: o.WitnessQuorum})
	if err != nil {
		return err
	}
	if !rep.RootVerified {
		// The root cannot be confirmed (an entry altered, leaves missing
		// or claimed twice): a deleted entry must not hide an altered one,
		// so each entry present is checked by its own inclusion proof.
		if err := o.locate(ctx, f, cp, rep); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the altered entries could not be located: %v", err))
		}
	}
	rep.Write(stdout)
	if !rep.OK() || !consistent {
		return errors.New("not verified")
	}
	if o.Pinned == nil {
		fmt.Fprintln(stdout, trustVerdict)
	}
	if o.Save != "" {
		if err := cli.WriteFileAtomic(o.Save, note, 0o644); err != nil {
			return fmt.Errorf("--save-checkpoint: %w", err)
		}
		fmt.Fprintf(stdout, "saved the verified checkpoint (size %d) to %s\n", cp.Size, o.Save)
	}
	return nil
}

// waitCovered waits, at most o.Wait, until the latest checkpoint covers
// the newest entry the list route shows (its leaf_index below the
// checkpoint's size): a new organization's first checkpoint, or one that
// takes what was just recorded, comes within the server's checkpoint
// interval. It says on stdout when it gave up; the verification then
// reports what no checkpoint covers yet.
func (o *Online) waitCovered(ctx context.Context, stdout io.Writer) {
	deadline := time.Now().Add(o.Wait)
	base := "/api/v1/orgs/" + o.org.String() + "/" + o.route
	for {
		covered, state := o.covered(ctx, base)
		if covered {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(stdout, "note: waited %s: %s\n", o.Wait, state)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// covered says whether the latest checkpoint covers the newest listed
// entry, and if not, why.
func (o *Online) covered(ctx context.Context, base string) (bool, string) {
	raw, err := o.get(ctx, base+"?limit=1")
	if err != nil {
		return false, fmt.Sprintf("the list route: %v", err)
	}
	var page struct {
		Items []struct {
			LeafIndex *uint64 `json:"leaf_index"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return false, fmt.Sprintf("the list route: %v", err)
	}
	raw, err = o.get(ctx, base+"/checkpoint")
	if err != nil {
		return false, "no checkpoint yet"
	}
	var cp struct {
		Size uint64 `json:"size"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return false, fmt.Sprintf("the checkpoint route: %v", err)
	}
	switch {
	case len(page.Items) == 0:
		return true, ""
	case page.Items[0].LeafIndex == nil:
		return false, "the newest entry is not in the log yet"
	case *page.Items[0].LeafIndex >= cp.Size:
		return false, fmt.Sprintf("the latest checkpoint (size %d) does not cover the newest entry (leaf %d) yet", cp.Size, *page.Items[0].LeafIndex)
	}
	return true, ""
}

// keys are the keys the checkpoint must be signed by: the pinned ones, or
// (--trust-server-keys, said on stdout) those the server lists.
func (o *Online) keys(ctx context.Context, stdout io.Writer) (tlog.KeySet, error) {
	if o.Pinned != nil {
		return *o.Pinned, nil
	}
	fmt.Fprintln(stdout, trustWarning)
	return o.serverKeys(ctx)
}

func (o *Online) serverKeys(ctx context.Context) (tlog.KeySet, error) {
	raw, err := o.get(ctx, "/api/v1/audit_keys")
	if err != nil {
		return tlog.KeySet{}, err
	}
	ks, err := tlog.ParseKeySet(raw)
	if err != nil {
		return tlog.KeySet{}, fmt.Errorf("the server's audit keys: %w", err)
	}
	return ks, nil
}

// checkpointFailed reports a latest checkpoint that does not open with
// the keys. Signed by a key not pinned, it says whether the server lists
// that key (a rotation after the keys file was saved, or a log signed
// again by whoever rewrote it: only a check apart from this server tells).
func (o *Online) checkpointFailed(ctx context.Context, note []byte, err error, stdout io.Writer) {
	if o.Pinned == nil {
		fmt.Fprintf(stdout, "FAIL: the log's latest checkpoint: %v\n", strings.TrimPrefix(err.Error(), "tlog: "))
		return
	}
	fmt.Fprintf(stdout, "FAIL: the log's latest checkpoint: %s\n", Describe(err))
	if !errors.Is(err, tlog.ErrUnknownKey) {
		return
	}
	served, serr := o.serverKeys(ctx)
	if serr != nil {
		return
	}
	if _, k, err := tlog.Open(note, served); err == nil {
		fmt.Fprintf(stdout, "note: the server lists that key (%s, %q, from %s) but --keys does not pin it: add it to the keys file only once checked apart from this server (a key rotation), never because this server serves it\n",
			k.KeyID, k.Name, k.NotBefore.UTC().Format(tlog.TimeFormat))
	}
}

// maxLocateProofs bounds the inclusion proofs asked to locate altered
// entries when the root cannot be confirmed.
const maxLocateProofs = 5000

// locate names the entries whose leaf differs from the one the log
// recorded, adding them to rep: for each entry of the export below cp's
// size (at most maxLocateProofs), the inclusion proof of its event
// against cp; a proof that verifies for the server's leaf hash but not for
// the entry's own bytes is an altered (or swapped) entry, one that does not
// verify at all or that the log does not have is an entry not in the log
// at its place.
func (o *Online) locate(ctx context.Context, f *os.File, cp tlog.Checkpoint, rep *Report) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, tlog.MaxEntryBytes+1)
	asked, found, left, line := 0, 0, 0, 0
	for sc.Scan() {
		line++
		e, err := tlog.ParseEntry(nil, sc.Bytes())
		if err != nil || e.LeafIndex < 0 || e.LeafIndex >= cp.Size || e.EventID() == "" {
			continue
		}
		if asked == maxLocateProofs {
			left++
			continue
		}
		asked++
		raw, err := o.get(ctx, fmt.Sprintf("/api/v1/orgs/%s/%s/proof?event_id=%s&size=%d", o.org, o.route, url.QueryEscape(e.EventID()), cp.Size))
		var ae *apiclient.Error
		if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusBadRequest) {
			found++
			rep.Add(Problem{Kind: KindAltered, Leaf: e.LeafIndex, Line: line, Message: fmt.Sprintf(
				"leaf %d (event %q) is not in the log at that place: the proof route answered %d (%.200q): an entry inserted, or its event_id or leaf_index changed", e.LeafIndex, e.EventID(), ae.Status, ae.Msg)})
			continue
		}
		if err != nil {
			return err
		}
		var d struct {
			LeafIndex int64    `json:"leaf_index"`
			LeafHash  string   `json:"leaf_hash"`
			Hashes    []string `json:"hashes"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("the proof route answered %.200s", raw)
		}
		proof, err := decodeHashes(d.Hashes)
		if err != nil {
			return err
		}
		if tlog.VerifyInclusion(cp.Size, cp.Root, e.LeafIndex, e.Leaf, proof) == nil {
			continue
		}
		found++
		msg := fmt.Sprintf("leaf %d (event %q): no inclusion proof in the checkpoint verifies for it", e.LeafIndex, e.EventID())
		if recorded, err := decodeHashes([]string{d.LeafHash}); err == nil && d.LeafIndex == e.LeafIndex &&
			tlog.VerifyInclusion(cp.Size, cp.Root, d.LeafIndex, recorded[0], proof) == nil {
			msg = fmt.Sprintf("leaf %d (event %q) was altered: its entry does not hash to the leaf that the log recorded and the checkpoint proves", e.LeafIndex, e.EventID())
		}
		rep.Add(Problem{Kind: KindAltered, Leaf: e.LeafIndex, Line: line, Message: msg})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	rep.Unchecked = 0 // checked here, but for those said
	switch {
	case left > 0:
		rep.Notes = append(rep.Notes, fmt.Sprintf("the inclusion proofs of the first %d entries were checked, not those of the %d after them", asked, left))
	case found == 0:
		rep.Notes = append(rep.Notes, fmt.Sprintf("each of the %d entries present below the checkpoint's size has a valid inclusion proof in it: none of them was altered", asked))
	}
	return nil
}

func decodeHashes(ss []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != len(out[i]) {
			return nil, fmt.Errorf("hash %d of a proof is not base64 of 32 bytes", i)
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// checkConsistency asks the consistency proof from the kept checkpoint to
// cp and checks it (true: nothing to check, or it verifies).
func (o *Online) checkConsistency(ctx context.Context, ks tlog.KeySet, cp tlog.Checkpoint, stdout io.Writer) bool {
	if o.Since == nil {
		return true
	}
	kept, _, err := tlog.Open(o.Since, ks)
	if err != nil {
		return true // the export's verification reports the kept checkpoint
	}
	if kept.Size > cp.Size || kept.Origin != cp.Origin {
		return true // rolled back or another log: reported by the export's verification
	}
	raw, err := o.get(ctx, fmt.Sprintf("/api/v1/orgs/%s/%s/consistency?from=%d&to=%d", o.org, o.route, kept.Size, cp.Size))
	if err != nil {
		fmt.Fprintf(stdout, "FAIL: the consistency proof from the kept checkpoint (size %d) to the latest (size %d): %v\n", kept.Size, cp.Size, err)
		return false
	}
	var d struct {
		Hashes []string `json:"hashes"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		fmt.Fprintf(stdout, "FAIL: the consistency route answered %.200s\n", raw)
		return false
	}
	proof, err := decodeHashes(d.Hashes)
	if err != nil {
		fmt.Fprintf(stdout, "FAIL: the consistency proof: %v\n", err)
		return false
	}
	if err := tlog.VerifyConsistency(kept.Size, kept.Root, cp.Size, cp.Root, proof); err != nil {
		fmt.Fprintf(stdout, "FAIL: the log of size %d does not extend the kept checkpoint of size %d: %v\n", cp.Size, kept.Size, err)
		return false
	}
	fmt.Fprintf(stdout, "OK: the consistency proof from the kept checkpoint (size %d) to size %d verifies\n", kept.Size, cp.Size)
	return true
}

// export writes the org's whole JSONL export to w.
func (o *Online) export(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	resp, err := o.do(ctx, "/api/v1/orgs/"+o.org.String()+"/"+o.route+"/export?format=jsonl")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	limit := o.MaxExport
	if limit < math.MaxInt64 {
		limit++ // one byte more tells a larger export
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit))
	if err != nil {
		return fmt.Errorf("reading the export: %w", err)
	}
	if n > o.MaxExport {
		return fmt.Errorf("the export is larger than --max-export-bytes (%d bytes): not verified (for a larger organization, raise it)", o.MaxExport)
	}
	return nil
}

// do opens a GET of path (apiclient: the key sent to the server's origin
// only, no redirect followed; an error answer is an *apiclient.Error).
func (o *Online) do(ctx context.Context, path string) (*http.Response, error) {
	c := &apiclient.Client{Base: strings.TrimRight(o.base, "/"), Key: o.key, Source: "CLI", HTTP: o.client}
	return c.Open(ctx, path)
}

// rateLimitWaits bounds the answers 429 (rate limited) a request
// waits out, maxRetryAfter each wait: the inclusion proofs of a
// large log are many requests, and the audit API counts them.
const (
	rateLimitWaits = 5
	maxRetryAfter  = 2 * time.Minute
)

// get answers the data of a small GET, waiting out a rate limit (429 and
// its Retry-After) a few times.
func (o *Online) get(ctx context.Context, path string) (json.RawMessage, error) {
	for waits := 0; ; waits++ {
		raw, wait, err := o.getOnce(ctx, path)
		if wait == 0 || waits == rateLimitWaits {
			return raw, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// getOnce is one GET of get; wait is how long a 429 asks to wait (0: not
// rate limited).
func (o *Online) getOnce(ctx context.Context, path string) (_ json.RawMessage, wait time.Duration, _ error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	resp, err := o.do(ctx, path)
	if ae, ok := errors.AsType[*apiclient.Error](err); ok && ae.Status == http.StatusTooManyRequests {
		return nil, min(max(ae.RetryAfter, time.Second), maxRetryAfter), err
	}
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(raw) > maxAnswer {
		return nil, 0, fmt.Errorf("GET %s: an answer over %d bytes", path, maxAnswer)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, 0, fmt.Errorf("GET %s: not an auditrail answer: %.200s", path, raw)
	}
	return env.Data, 0, nil
}

// ParseOnline reads the online flags (checked: url, key, org, kind).
func ParseOnline(base, key, org, kind string) (*Online, error) {
	if err := apiclient.CheckBaseURL(base); err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, cli.UsageErrorf("--url: %v", err)
	}
	if u.Scheme != "https" && !apiclient.IsLoopbackHost(u.Hostname()) {
		return nil, cli.UsageErrorf("--url %q: https required: plain http is taken only to a loopback host (127.0.0.0/8, ::1, localhost), elsewhere anyone on the way could read the API key and serve another log", redact.URL(base))
	}
	if key == "" {
		return nil, cli.UsageErrorf("--key is required with --url: an API key that may read the organization")
	}
	id, err := uuid.Parse(org)
	if err != nil || org == "" {
		return nil, cli.UsageErrorf("--org %q is not an organization id (a UUID)", org)
	}
	o := &Online{base: base, key: key, org: id, MaxExport: DefaultMaxExportBytes}
	switch kind {
	case "audit", "":
		o.route = "audit_logs"
	case "executions":
		o.route = "tool_executions"
	default:
		return nil, cli.UsageErrorf("--kind %q is not audit or executions", kind)
	}
	return o, nil
}
