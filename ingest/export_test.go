package ingest

// NumDelivered exposes numDelivered to the tests.
var NumDelivered = numDelivered

// StreamSeq exposes streamSeq to the tests.
var StreamSeq = streamSeq
