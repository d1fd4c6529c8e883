package odata

import (
	"math/rand/v2"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A parsed Filter and Search are used by many requests at once: answers
// from concurrent goroutines equal the sequential ones (run with -race).
func TestConcurrentMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	box := genMailbox(r, 500)
	objs := make([]map[string]any, len(box))
	for i := range box {
		objs[i] = box[i].object(r)
	}
	f, err := ParseFilter("receivedDateTime ge 2026-02-01T00:00:00Z and (contains(subject,'plan') or toRecipients/any(r: r/emailAddress/address eq 'ann@contoso.com'))")
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseSearch(`"plan OR received>=2026-03-01"`)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][2]bool, len(objs))
	for i, o := range objs {
		want[i] = [2]bool{f.Match(o), q.Match(o)}
	}
	var wg sync.WaitGroup
	errs := make(chan int, 4)
	for range 4 {
		wg.Go(func() {
			for i, o := range objs {
				if (f.Match(o) != want[i][0]) || (q.Match(o) != want[i][1]) {
					errs <- i
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for i := range errs {
		t.Errorf("message %d: a concurrent answer differs", i)
	}
}
