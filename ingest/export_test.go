package ingest

import "time"

// NumDelivered exposes numDelivered to the tests.
var NumDelivered = numDelivered

// StreamSeq exposes streamSeq to the tests.
var StreamSeq = streamSeq

// SetAsyncPublishTimeout sets how long ingesters made after it wait for
// the ack of a dead letter or a commit mark, until the test ends.
func SetAsyncPublishTimeout(t interface{ Cleanup(func()) }, d time.Duration) {
	old := asyncPublishTimeout
	asyncPublishTimeout = d
	t.Cleanup(func() { asyncPublishTimeout = old })
}
