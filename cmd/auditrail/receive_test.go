//go:build e2e

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/deliver"
)

// `auditrail receive --dedup-window N` remembers the last N distinct
// event ids: a redelivery within them is a duplicate, an id older than
// that counts as new again; a window below 1 is a usage mistake.
func TestReceiveDedupWindow(t *testing.T) {
	t.Parallel()
	const secret = "a-secret-of-the-receive-test"
	addr, out := startReceive(t, secret, "--dedup-window", "3")
	post := func(ids ...string) {
		t.Helper()
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "{\"event_id\":%q}\n", id)
		}
		body := []byte(b.String())
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", bytes.NewReader(body))
		req.Header.Set(deliver.HeaderSignature, deliver.Sign([]byte(secret), time.Now(), body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d\n%s", resp.StatusCode, out)
		}
	}
	steps := []struct {
		ids                []string
		unique, duplicates int
	}{
		{[]string{"a", "b", "c"}, 3, 0},
		{[]string{"a", "c"}, 3, 2}, // within the window
		{[]string{"d"}, 4, 2},      // a is forgotten
		{[]string{"a"}, 5, 2},      // new again; b is forgotten
		{[]string{"d", "c"}, 5, 4},
	}
	for i, st := range steps {
		post(st.ids...)
		if c := receiveCounts(t, addr); c["unique"] != float64(st.unique) || c["duplicates"] != float64(st.duplicates) {
			t.Fatalf("step %d (%v): counts %v, want unique %d, duplicates %d", i, st.ids, c, st.unique, st.duplicates)
		}
	}
	for _, bad := range []string{"0", "-1"} {
		err := exec.Command(binary(t), "receive", "--secret", secret, "--dedup-window", bad).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("--dedup-window %s: %v, want exit 2", bad, err)
		}
	}
}
