package deliver

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"sync"
	"time"

	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Secret verifies Auditrail-Signature (required unless SplunkToken).
	Secret []byte
	// SplunkToken, when set, is required as Authorization: Splunk <token>
	// (a stand-in for Splunk HEC); a signature is then checked only when
	// Secret is set too.
	SplunkToken string
	// Tolerance of the signature's time (DefaultTolerance).
	Tolerance time.Duration
	// MaxBody bounds a delivery's body (413 above).
	MaxBody int64
	// DedupWindow is how many distinct event ids are remembered for
	// duplicate detection (DefaultDedupWindow): the last ones first
	// received. An event redelivered after this many others is counted
	// again as new; memory stays bounded whatever the traffic.
	DedupWindow int
	// Log, when set, gets one line per delivery.
	Log io.Writer
	// Now is the clock (time.Now).
	Now func() time.Time
	// Keys, when set, verifies the proofs of JSON deliveries
	// (BatchVerifier): a line per finding in Log, and the counts.
	Keys *tlog.KeySet
}

// DefaultMaxReceiveBody is the largest body a Receiver takes by default.
const DefaultMaxReceiveBody = 16 << 20

// DefaultDedupWindow is how many distinct event ids a Receiver remembers
// by default (a few MiB).
const DefaultDedupWindow = 100_000

// MaxEventIDBytes bounds an event id a Receiver takes (a UUID has 36
// bytes): the memory of its dedup window is bounded by DedupWindow ids of
// at most this size.
const MaxEventIDBytes = 256

// Counts are what a Receiver took.
type Counts struct {
	Deliveries int64 `json:"deliveries"` // accepted POSTs
	Events     int64 `json:"events"`     // events in them
	Unique     int64 `json:"unique"`     // events whose event_id was not in the dedup window
	Duplicates int64 `json:"duplicates"` // events whose event_id was (redelivered)
	Rejected   int64 `json:"rejected"`   // POSTs refused (signature, token, body)
	// With Keys: batches verified, leaf gaps and duplicates found,
	// proofs that failed, entries without a proof.
	Verified      int64 `json:"verified,omitempty"`
	Gaps          int64 `json:"gaps,omitempty"`
	LeafDuplicate int64 `json:"leaf_duplicates,omitempty"`
	ProofFailures int64 `json:"proof_failures,omitempty"`
	Unproven      int64 `json:"unproven,omitempty"`
}

// Receiver takes signed deliveries: it verifies each body's signature
// (constant time, time within the tolerance) or Splunk token (constant
// time), dedups the events by event_id within its window and counts them.
// GET /counts answers the counts, GET /events the distinct event ids of
// the window in the order first received.
type Receiver struct {
	cfg    ReceiverConfig
	token  [sha256.Size]byte // SHA-256 of the expected Authorization header (SplunkToken)
	mu     sync.Mutex
	seen   *window
	counts Counts
	proofs *BatchVerifier
}

// window is a fixed-capacity set of the last ids first seen: a ring of
// them in the order first seen, and their index.
type window struct {
	ring []string
	next int // the oldest id's slot once the ring is full
	in   map[string]struct{}
}

func newWindow(n int) *window {
	return &window{ring: make([]string, 0, n), in: make(map[string]struct{}, n)}
}

// add records id and reports whether it is new; when the window is full
// the oldest id is forgotten.
func (w *window) add(id string) bool {
	if _, ok := w.in[id]; ok {
		return false
	}
	if len(w.ring) < cap(w.ring) {
		w.ring = append(w.ring, id)
	} else {
		delete(w.in, w.ring[w.next])
		w.ring[w.next] = id
		w.next = (w.next + 1) % len(w.ring)
	}
	w.in[id] = struct{}{}
	return true
}

// ids are the ids of the window, oldest first.
func (w *window) ids() []string {
	out := make([]string, 0, len(w.ring))
	out = append(out, w.ring[w.next:]...)
	return append(out, w.ring[:w.next]...)
}

// NewReceiver returns a receiver.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if len(cfg.Secret) == 0 && cfg.SplunkToken == "" {
		return nil, fmt.Errorf("%w: a secret (or a Splunk token) is required", ErrInvalidOption)
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = DefaultTolerance
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxReceiveBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DedupWindow < 0 {
		return nil, fmt.Errorf("%w: the dedup window must not be negative", ErrInvalidOption)
	}
	if cfg.DedupWindow == 0 {
		cfg.DedupWindow = DefaultDedupWindow
	}
	r := &Receiver{cfg: cfg, token: sha256.Sum256([]byte("Splunk " + cfg.SplunkToken)), seen: newWindow(cfg.DedupWindow)}
	if cfg.Keys != nil {
		r.proofs = NewBatchVerifier(*cfg.Keys)
	}
	return r, nil
}

// tokenOK reports whether an Authorization header carries the Splunk
// token. Both sides are hashed first, so the comparison takes the same
// time whatever the header's length and content.
func (r *Receiver) tokenOK(header string) bool {
	got := sha256.Sum256([]byte(header))
	return subtle.ConstantTimeCompare(got[:], r.token[:]) == 1
}

// Counts returns the counts so far.
func (r *Receiver) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// EventIDs returns the distinct event ids of the dedup window (the last
// DedupWindow first received), in the order first received.
func (r *Receiver) EventIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen.ids()
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Method == http.MethodGet && req.URL.Path == "/counts":
		writeJSON(w, http.StatusOK, r.Counts())
	case req.Method == http.MethodGet && req.URL.Path == "/events":
		writeJSON(w, http.StatusOK, map[string]any{"event_ids": r.EventIDs()})
	case req.Method == http.MethodPost:
		r.receive(w, req)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "GET /counts, GET /events, or POST a delivery", http.StatusMethodNotAllowed)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (r *Receiver) reject(w http.ResponseWriter, status int, msg string) {
	r.mu.Lock()
	r.counts.Rejected++
	r.mu.Unlock()
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "rejected status=%d reason=%q\n", status, msg)
	}
	http.Error(w, msg, status)
}

func (r *Receiver) receive(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, r.cfg.MaxBody+1))
	if err != nil {
		r.reject(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	if int64(len(body)) > r.cfg.MaxBody {
		r.reject(w, http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	if r.cfg.SplunkToken != "" && !r.tokenOK(req.Header.Get("Authorization")) {
		r.reject(w, http.StatusUnauthorized, "missing or wrong Splunk token")
		return
	}
	if len(r.cfg.Secret) > 0 {
		if err := Verify(r.cfg.Secret, req.Header.Get(HeaderSignature), body, r.cfg.Now(), r.cfg.Tolerance); err != nil {
			r.reject(w, http.StatusUnauthorized, err.Error())
			return
		}
	}
	ids, err := EventIDs(body)
	if err != nil {
		r.reject(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, id := range ids {
		if len(id) > MaxEventIDBytes {
			r.reject(w, http.StatusBadRequest, fmt.Sprintf("an event id of %d bytes (at most %d)", len(id), MaxEventIDBytes))
			return
		}
	}
	r.mu.Lock()
	fresh := 0
	for _, id := range ids {
		if !r.seen.add(id) {
			r.counts.Duplicates++
			continue
		}
		fresh++
	}
	r.counts.Deliveries++
	r.counts.Events += int64(len(ids))
	r.counts.Unique += int64(fresh)
	var findings []Finding
	if r.proofs != nil {
		findings = r.proofs.Body(body) // in the order bodies are taken
		for _, f := range findings {
			switch f.Kind {
			case "verified":
				r.counts.Verified++
			case "gap":
				r.counts.Gaps++
			case "duplicate":
				r.counts.LeafDuplicate++
			case "unproven":
				r.counts.Unproven++
			default:
				r.counts.ProofFailures++
			}
		}
	}
	c := r.counts
	r.mu.Unlock()
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "delivery %s events=%d new=%d duplicates=%d unique_total=%d\n",
			req.Header.Get(HeaderDeliveryID), len(ids), fresh, len(ids)-fresh, c.Unique)
		for _, f := range findings {
			fmt.Fprintln(r.cfg.Log, f)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"received": len(ids), "new": fresh})
}

// EventIDs returns the event id of every line of a delivery body: a JSON
// object per line, whose id is its event_id, or (OCSF) its metadata.uid,
// or the same inside a Splunk HEC envelope's event. A checkpoint line
// ({"type":"checkpoint",…}, bare or in an envelope) is not an event: it
// is skipped.
func EventIDs(body []byte) ([]string, error) {
	var out []string
	for n, line := range bodyLines(body) {
		var v struct {
			Type     string `json:"type"`
			EventID  string `json:"event_id"`
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
			Event *struct {
				Type     string `json:"type"`
				EventID  string `json:"event_id"`
				Metadata struct {
					UID string `json:"uid"`
				} `json:"metadata"`
			} `json:"event"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if v.Type == schemas.KindCheckpoint || v.Type == BatchType || v.Event != nil && v.Event.Type == schemas.KindCheckpoint {
			continue // a signed checkpoint or a batch's proof, not an event
		}
		id := v.EventID
		if id == "" {
			id = v.Metadata.UID
		}
		if id == "" && v.Event != nil {
			id = v.Event.EventID
			if id == "" {
				id = v.Event.Metadata.UID
			}
		}
		if id == "" {
			return nil, fmt.Errorf("line %d: no event_id", n)
		}
		out = append(out, id)
	}
	return out, nil
}

// bodyLines yields the non-empty lines of a delivery body, trimmed, with
// their 1-based numbers (a line may be as long as the body: nothing is
// cut).
func bodyLines(body []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		for n, rest := 1, body; len(rest) > 0; n++ {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			rest = after
			if line = bytes.TrimSpace(line); len(line) > 0 && !yield(n, line) {
				return
			}
		}
	}
}
