package controlplane

import "errors"

// ErrAuditLog: the audit event of a mutation could not be recorded; the
// HTTP layer answers 503.
var ErrAuditLog = errors.New("audit log unavailable")
