package odata

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkMatch(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	box := genMailbox(r, 1000)
	objs := make([]map[string]any, len(box))
	for i := range box {
		objs[i] = box[i].object(r)
	}
	f, err := ParseFilter("receivedDateTime ge 2026-01-15T00:00:00Z and receivedDateTime lt 2026-03-01T00:00:00Z and (importance eq 'high' or isRead eq false) and (contains(subject,'budget') or toRecipients/any(r: r/emailAddress/address eq 'ann@contoso.com'))")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Match(objs[i%len(objs)])
	}
}
