package ingest

// NumDelivered exposes numDelivered to the tests.
var NumDelivered = numDelivered
