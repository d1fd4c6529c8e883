// Package odata evaluates the OData query options of Microsoft Graph's mail
// API ($filter, $orderby, $search) over Graph JSON objects as encoding/json
// decodes them (map[string]any holding strings, float64, bool, nil, []any
// and map[string]any; DateTimeOffset values are RFC 3339 strings).
//
// It is the query language of the Graph mail emulator. Errors are *Error
// values carrying Graph's code and message, which the server writes as they
// are: {"error":{"code":"BadRequest","message":"Invalid filter clause: …"}}.
//
// # $filter
//
// A tokenizer and a recursive-descent parser with ODataLib's precedence
// (or, and, comparisons, not from loosest). Properties are checked
// against the entity type (Message, MailFolder) and resolved ignoring case
// as Graph does; operand types are checked as ODataLib does, so
// "subject eq 123" and "receivedDateTime ge '2026-01-01T00:00:00Z'" are 400
// "A binary operator with incompatible types was detected …". A quoted
// literal is always a string. DateTimeOffset literals are unquoted
// (2026-01-02T03:04:05Z, with fractions and offsets; hh:mm without seconds
// is accepted) and compared as instants with the object's RFC 3339 strings;
// a date-only literal (2026-01-02) is midnight UTC. Strings compare
// case-insensitively, as Exchange does, in eq/ne/gt/ge/lt/le and in
// contains/startswith/endswith. A missing property is null: eq null is
// true, and ordering comparisons with null are false. any()/all() bind a
// variable over a collection (toRecipients, categories); any() without a
// body tests non-emptiness. OData functions Exchange does not run
// (tolower, length, …) are 400 ErrorInvalidUrlQueryFilter; unknown ones
// 400 BadRequest. The parse is done once: paths are resolved to []string
// and literals parsed, so Match only walks maps.
//
// # $orderby
//
// "path [asc|desc]" keys; Compare puts null and missing values first
// ascending and last descending (OData's rule), compares strings
// case-insensitively and DateTimeOffset strings as instants.
// CheckInefficient is Exchange's InefficientFilter rule for messages.
//
// # $search
//
// The KQL subset Exchange supports on messages; see Search.
package odata
