package deliver_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
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
