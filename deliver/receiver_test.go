package deliver_test

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/deliver"
)

// The receiver takes a correctly signed body once per event id and
// refuses a tampered body, a tampered or missing signature, another
// secret's signature and a stale or future time.
func TestReceiverVerifiesSignatures(t *testing.T) {
	key := []byte(secret)
	body := []byte(`{"event_id":"e1","action":"AUDIT_ACTION_CREATED"}` + "\n" + `{"event_id":"e2"}` + "\n")
	now := time.Now()
	good := deliver.Sign(key, now, body)
	flip := func(s string) string { // the last hex digit changed
		b := []byte(s)
		if b[len(b)-1] == '0' {
			b[len(b)-1] = '1'
		} else {
			b[len(b)-1] = '0'
		}
		return string(b)
	}
	tests := []struct {
		name   string
		body   []byte
		header string
		want   int
	}{
		{"signed", body, good, 200},
		{"the same again (redelivery)", body, good, 200},
		{"tampered body", bytes.Replace(body, []byte("e2"), []byte("e3"), 1), good, 401},
		{"tampered signature", body, flip(good), 401},
		{"no signature", body, "", 401},
		{"another secret", body, deliver.Sign([]byte("another-secret-entirely"), now, body), 401},
		{"stale", body, deliver.Sign(key, now.Add(-10*time.Minute), body), 401},
		{"future", body, deliver.Sign(key, now.Add(10*time.Minute), body), 401},
		{"t changed", body, strings.Replace(good, "t="+strconv.FormatInt(now.Unix(), 10), "t="+strconv.FormatInt(now.Unix()+1, 10), 1), 401},
		{"malformed", body, "v1=zz", 401},
		{"two v1, one valid (rotation)", body, good + ",v1=" + strings.Repeat("0", 64), 200},
		{"a line that is not JSON", []byte("nope\n"), deliver.Sign(key, now, []byte("nope\n")), 400},
		{"a line without event id", []byte("{}\n"), deliver.Sign(key, now, []byte("{}\n")), 400},
	}
	r, err := deliver.NewReceiver(deliver.ReceiverConfig{Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/events", bytes.NewReader(tt.body))
			if tt.header != "" {
				req.Header.Set(deliver.HeaderSignature, tt.header)
			}
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Fatalf("status %d (want %d): %s", w.Code, tt.want, w.Body)
			}
		})
	}
	c := r.Counts()
	if c.Unique != 2 || c.Duplicates != 4 || c.Deliveries != 3 || c.Rejected != int64(len(tests)-3) {
		t.Fatalf("counts %+v", c)
	}
	big, err := deliver.NewReceiver(deliver.ReceiverConfig{Secret: key, MaxBody: 10})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	big.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %d", w.Code)
	}
}

func TestEventIDs(t *testing.T) {
	body := `{"event_id":"a"}` + "\n\n" + `{"metadata":{"uid":"b"},"class_uid":6003}` + "\n" +
		`{"time":1.5,"event":{"event_id":"c"}}` + "\n" + `{"type":"checkpoint","note":"x"}` + "\n" +
		`{"time":1.5,"event":{"type":"checkpoint","note":"x"}}` + "\n" + `{"event":{"metadata":{"uid":"d"}}}`
	ids, err := deliver.EventIDs([]byte(body))
	if err != nil || strings.Join(ids, ",") != "a,b,c,d" {
		t.Fatalf("%v %v", ids, err)
	}
}

func FuzzVerify(f *testing.F) {
	key := []byte(secret)
	now := time.Unix(1_800_000_000, 0)
	f.Add(deliver.Sign(key, now, []byte("x")), []byte("x"))
	f.Add("t=1,v1=00", []byte(""))
	f.Add("t=,v1=,v1", []byte("{}"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		if deliver.Verify(key, header, body, now, time.Minute) != nil {
			return
		}
		// It verified: it names a time, and holds the HMAC of that time
		// and this body.
		var ts int64 = -1
		for _, p := range strings.Split(header, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "t="); ok {
				ts, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		_, want, _ := strings.Cut(deliver.Sign(key, time.Unix(ts, 0), body), ",")
		if !strings.Contains(header, want) {
			t.Fatalf("%q verified without %s", header, want)
		}
	})
}

func FuzzEventIDs(f *testing.F) {
	f.Add([]byte(`{"event_id":"a"}` + "\n"))
	f.Add([]byte(`{"event":{"metadata":{"uid":"d"}}}`))
	f.Add([]byte("\n\n{"))
	f.Fuzz(func(t *testing.T, body []byte) {
		ids, err := deliver.EventIDs(body)
		if err == nil {
			for _, id := range ids {
				if id == "" {
					t.Fatal("an empty id")
				}
			}
		}
	})
}

// The receiver standing in for Splunk HEC takes exactly its token:
// another one, a prefix, an extension, another scheme or none is 401.
func TestReceiverSplunkToken(t *testing.T) {
	const token = "hec-token-0123456789"
	r, err := deliver.NewReceiver(deliver.ReceiverConfig{SplunkToken: token})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event":{"event_id":"e1"}}` + "\n")
	tests := []struct {
		name, header string
		want         int
	}{
		{"the token", "Splunk " + token, 200},
		{"last byte changed", "Splunk " + token[:len(token)-1] + "8", 401},
		{"a prefix", "Splunk " + token[:5], 401},
		{"longer", "Splunk " + token + "0", 401},
		{"another scheme", "Bearer " + token, 401},
		{"the bare token", token, 401},
		{"none", "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/services/collector/event", bytes.NewReader(body))
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d", w.Code, tt.want)
			}
		})
	}
}

// The receiver compares what authenticates a delivery in constant time:
// no == or != in receiver.go has an operand that names the Splunk token
// or the secret (a plain string comparison returns at the first byte
// that differs, which a caller can time to guess the token byte by
// byte). The check reads the source, since timing cannot be measured
// reliably on a shared machine.
func TestReceiverComparesSecretsInConstantTime(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "receiver.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"SplunkToken", "Secret", "token"}
	names := func(e ast.Expr) string {
		found := ""
		ast.Inspect(e, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && slices.Contains(secrets, id.Name) {
				found = id.Name
			}
			return found == ""
		})
		return found
	}
	comparisons := 0
	ast.Inspect(f, func(n ast.Node) bool {
		b, ok := n.(*ast.BinaryExpr)
		if !ok || (b.Op != token.EQL && b.Op != token.NEQ) {
			return true
		}
		comparisons++
		for _, side := range []ast.Expr{b.X, b.Y} {
			// len(x) == 0 tells whether one is configured, not its value;
			// subtle.ConstantTimeCompare(…) == 1 is the constant-time way.
			if call, ok := side.(*ast.CallExpr); ok {
				if fn, ok := call.Fun.(*ast.Ident); ok && fn.Name == "len" {
					continue
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "subtle" || pkg.Name == "hmac") {
						continue
					}
				}
			}
			if lit, ok := side.(*ast.BasicLit); ok && lit.Value == `""` {
				continue
			}
			if name := names(side); name != "" {
				// An emptiness check (x != "") is fine: the other side is "".
				other := b.Y
				if side == b.Y {
					other = b.X
				}
				if lit, ok := other.(*ast.BasicLit); ok && lit.Value == `""` {
					continue
				}
				t.Errorf("%s: %s compares %s with %s: use crypto/subtle", fset.Position(b.Pos()), types.ExprString(b), name, b.Op)
			}
		}
		return true
	})
	if comparisons == 0 {
		t.Fatal("no comparison found: the check reads nothing")
	}
}

// Duplicate detection remembers a bounded window of event ids: within
// it a redelivered event is a duplicate; past it the oldest ids are
// forgotten, so memory stays bounded however many events arrive.
func TestReceiverDedupWindowBounded(t *testing.T) {
	key := []byte(secret)
	const window = 1000
	r, err := deliver.NewReceiver(deliver.ReceiverConfig{Secret: key, DedupWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	post := func(ids ...string) {
		t.Helper()
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "{\"event_id\":%q}\n", id)
		}
		body := []byte(b.String())
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set(deliver.HeaderSignature, deliver.Sign(key, time.Now(), body))
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	batch := func(from, n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%08d-0000-4000-8000-000000000000", from+i)
		}
		return ids
	}
	// Within the window: every redelivery is a duplicate.
	first := batch(0, window)
	post(first...)
	post(first[:10]...)
	post(first[window-10:]...)
	if c := r.Counts(); c.Unique != window || c.Duplicates != 20 {
		t.Fatalf("within the window: %+v", c)
	}
	// One more id forgets the oldest only.
	post(batch(window, 1)...)
	post(first[0]) // forgotten: new again (and first[1], now the oldest, is forgotten)
	post(first[2]) // still in the window
	if c := r.Counts(); c.Unique != window+2 || c.Duplicates != 21 {
		t.Fatalf("past the window, the oldest id counts as new, one still in it as a duplicate: %+v", c)
	}

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	tests := []struct {
		name   string
		events int // distinct events received before measuring
	}{
		{"10 windows", 10 * window},
		{"100 windows", 100 * window},
		{"300 windows", 300 * window},
	}
	var base uint64
	next := window + 1 // the ids received so far: 0 … window
	for i, tt := range tests {
		for ; next < tt.events; next += window {
			post(batch(next, window)...)
		}
		got := r.EventIDs()
		if len(got) != window || got[0] != batch(next-window, 1)[0] || got[window-1] != batch(next-1, 1)[0] {
			t.Fatalf("%s: the window holds %d ids from %q to %q, want the last %d received in order", tt.name, len(got), got[0], got[len(got)-1], window)
		}
		h := heap()
		t.Logf("%s: heap %d KiB", tt.name, h>>10)
		if i == 0 {
			base = h
			continue
		}
		// 1,000 ids of 36 bytes are about 100 KiB with their index: the
		// heap must not grow with the events received (it would by ~3 MiB
		// per 100 windows if every id were kept).
		if h > base+1<<20 {
			t.Fatalf("%s: heap grew from %d KiB to %d KiB", tt.name, base>>10, h>>10)
		}
	}
	if c := r.Counts(); c.Unique != int64(next)+1 { // first[0] twice
		t.Fatalf("counts %+v after %d distinct events", c, next)
	}
	// A duplicate in the last window is still found.
	post(batch(next-1, 1)...)
	if c := r.Counts(); c.Duplicates != 22 {
		t.Fatalf("a duplicate within the window after %d events: %+v", next, c)
	}
}

func TestReceiverRefusesHugeEventIDs(t *testing.T) {
	key := []byte(secret)
	r, err := deliver.NewReceiver(deliver.ReceiverConfig{Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id   string
		want int
	}{
		{strings.Repeat("a", deliver.MaxEventIDBytes), 200},
		{strings.Repeat("a", deliver.MaxEventIDBytes+1), 400},
	} {
		body := []byte(fmt.Sprintf("{\"event_id\":%q}\n", tt.id))
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set(deliver.HeaderSignature, deliver.Sign(key, time.Now(), body))
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != tt.want {
			t.Fatalf("an id of %d bytes: %d, want %d", len(tt.id), w.Code, tt.want)
		}
	}
	if _, err := deliver.NewReceiver(deliver.ReceiverConfig{Secret: key, DedupWindow: -1}); !errors.Is(err, deliver.ErrInvalidOption) {
		t.Fatalf("a negative window: %v", err)
	}
}
