package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/verify"
)

// onlineVerify is what `auditrail verify --url` checks.
type onlineVerify struct {
	base, key string
	org       uuid.UUID
	route     string // audit_logs or tool_executions
	since     []byte // a kept checkpoint (optional)
	save      string // where to write the verified checkpoint (optional)
	grace     time.Duration
	client    *http.Client
}

// verifyHTTPTimeout bounds each small request; the export is bounded by
// its own (long) timeout.
const (
	verifyHTTPTimeout   = 30 * time.Second
	verifyExportTimeout = 6 * time.Hour
	verifyMaxAnswer     = 1 << 20
)

// runOnline verifies an organization's log through the API: the keys, the
// latest checkpoint, the whole JSONL export (verified as offline), and,
// with a kept checkpoint, the consistency proof from it.
func (o *onlineVerify) run(ctx context.Context, stdout io.Writer) error {
	o.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	keysRaw, err := o.get(ctx, "/api/v1/audit_keys")
	if err != nil {
		return err
	}
	ks, err := tlog.ParseKeySet(keysRaw)
	if err != nil {
		return fmt.Errorf("the server's audit keys: %w", err)
	}
	cpRaw, err := o.get(ctx, "/api/v1/orgs/"+o.org.String()+"/"+o.route+"/checkpoint")
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return fmt.Errorf("the log has no checkpoint yet: nothing to verify (%s)", ae.msg)
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
		fmt.Fprintf(stdout, "FAIL: the log's latest checkpoint: %v\n", err)
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
		return err
	}
	rep, err := verify.Export(ctx, f, verify.Config{Keys: ks, Checkpoint: note, Since: o.since, PendingGrace: o.grace})
	if err != nil {
		return err
	}
	rep.Write(stdout)
	if slices.ContainsFunc(rep.Problems, func(p verify.Problem) bool { return p.Kind == verify.KindRoot }) {
		if err := o.locate(ctx, f, cp, stdout); err != nil {
			fmt.Fprintf(stdout, "note: the altered entries could not be located: %v\n", err)
		}
	}
	if !rep.OK() || !consistent {
		return errors.New("not verified")
	}
	if o.save != "" {
		if err := writeFileAtomic(o.save, note, 0o644); err != nil {
			return fmt.Errorf("--save-checkpoint: %w", err)
		}
		fmt.Fprintf(stdout, "saved the verified checkpoint (size %d) to %s\n", cp.Size, o.save)
	}
	return nil
}

// maxLocateProofs bounds the inclusion proofs asked to locate altered
// entries when the root differs.
const maxLocateProofs = 5000

// locate names the entries whose leaf differs from the one the log
// recorded: for each entry of the export (at most maxLocateProofs), the
// inclusion proof of its event against cp; a proof that verifies for the
// server's leaf hash but not for the entry's own bytes is an altered (or
// swapped) entry.
func (o *onlineVerify) locate(ctx context.Context, f *os.File, cp tlog.Checkpoint, stdout io.Writer) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, tlog.MaxEntryBytes+1)
	asked, found := 0, 0
	for sc.Scan() {
		e, err := tlog.ParseEntry(nil, sc.Bytes())
		if err != nil || e.LeafIndex < 0 || e.LeafIndex >= cp.Size || e.EventID() == "" {
			continue
		}
		if asked == maxLocateProofs {
			fmt.Fprintf(stdout, "note: located among the first %d entries only\n", maxLocateProofs)
			break
		}
		asked++
		raw, err := o.get(ctx, fmt.Sprintf("/api/v1/orgs/%s/%s/proof?event_id=%s&size=%d", o.org, o.route, url.QueryEscape(e.EventID()), cp.Size))
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
		recorded, err := decodeHashes([]string{d.LeafHash})
		if err != nil {
			return err
		}
		if d.LeafIndex == e.LeafIndex && tlog.VerifyInclusion(cp.Size, cp.Root, d.LeafIndex, recorded[0], proof) == nil {
			fmt.Fprintf(stdout, "FAIL: leaf %d (event %q) was altered: its entry does not hash to the leaf that the log recorded and the checkpoint proves\n", e.LeafIndex, e.EventID())
		} else {
			fmt.Fprintf(stdout, "FAIL: leaf %d (event %q): no inclusion proof in the checkpoint verifies for it\n", e.LeafIndex, e.EventID())
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if found == 0 {
		fmt.Fprintf(stdout, "note: each of the %d entries checked has a valid inclusion proof: the entries are complete but in another order, or a leaf is missing\n", asked)
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
func (o *onlineVerify) checkConsistency(ctx context.Context, ks tlog.KeySet, cp tlog.Checkpoint, stdout io.Writer) bool {
	if o.since == nil {
		return true
	}
	kept, _, err := tlog.Open(o.since, ks)
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
func (o *onlineVerify) export(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, verifyExportTimeout)
	defer cancel()
	resp, err := o.do(ctx, "/api/v1/orgs/"+o.org.String()+"/"+o.route+"/export?format=jsonl")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading the export: %w", err)
	}
	return nil
}

func (o *onlineVerify) do(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(o.base, "/")+path, nil)
	if err != nil {
		return nil, usageError{redact.Error(fmt.Errorf("--url: %w", err), o.base)}
	}
	req.Header.Set("Authorization", "Bearer "+o.key)
	req.Header.Set("X-Auditrail-Source", "CLI")
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, redact.Error(err, o.base)
	}
	return resp, nil
}

// get answers the data of a small GET.
func (o *onlineVerify) get(ctx context.Context, path string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, verifyHTTPTimeout)
	defer cancel()
	resp, err := o.do(ctx, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, answerError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, verifyMaxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(raw) > verifyMaxAnswer {
		return nil, fmt.Errorf("GET %s: an answer over %d bytes", path, verifyMaxAnswer)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("GET %s: not an auditrail answer: %.200s", path, raw)
	}
	return env.Data, nil
}

// answerError is the API's error answer.
func answerError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env struct {
		Msg string `json:"msg"`
	}
	_ = json.Unmarshal(raw, &env)
	if env.Msg == "" {
		env.Msg = fmt.Sprintf("%.200s", raw)
	}
	return &apiError{status: resp.StatusCode, msg: env.Msg}
}

// parseOnline reads the online flags (checked: url, key, org, kind).
func parseOnline(base, key, org, kind string) (*onlineVerify, error) {
	if err := checkBaseURL(base); err != nil {
		return nil, err
	}
	if _, err := url.Parse(base); err != nil {
		return nil, usageErrorf("--url: %v", err)
	}
	if key == "" {
		return nil, usageErrorf("--key is required with --url: an API key that may read the organization")
	}
	id, err := uuid.Parse(org)
	if err != nil || org == "" {
		return nil, usageErrorf("--org %q is not an organization id (a UUID)", org)
	}
	o := &onlineVerify{base: base, key: key, org: id}
	switch kind {
	case "audit", "":
		o.route = "audit_logs"
	case "executions":
		o.route = "tool_executions"
	default:
		return nil, usageErrorf("--kind %q is not audit or executions", kind)
	}
	return o, nil
}
