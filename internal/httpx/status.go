package httpx

// StatusError is an error that says which HTTP status answers it, for the
// packages that decide a status without linking an HTTP framework (the
// control-plane state refuses with 503 while its mirror is stale):
// httpapi answers Code with Msg as it answers a fiber.Error.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return e.Msg }
