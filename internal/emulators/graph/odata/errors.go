package odata

import "fmt"

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// Graph error codes returned by this package.
const (
	// CodeBadRequest is Graph's code for a $filter, $orderby or $search
	// that does not parse or does not type-check.
	CodeBadRequest = "BadRequest"
	// CodeInvalidURLQueryFilter is Exchange's code for a well-formed filter
	// it cannot run (e.g. a function it does not support on a property).
	CodeInvalidURLQueryFilter = "ErrorInvalidUrlQueryFilter"
	// CodeInefficientFilter is Exchange's code for a $filter and $orderby
	// combination it refuses (see CheckInefficient).
	CodeInefficientFilter = "InefficientFilter"
)

// Error is a query error in Graph's terms: the server answers 400 with
// {"error":{"code":Code,"message":Message}}.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// filterError is a $filter error: Graph prefixes the parser's message with
// "Invalid filter clause: ".
func filterError(format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Message: "Invalid filter clause: " + fmt.Sprintf(format, args...)}
}
