package cpstate

// The erasures of a person: an organization's owner (or the platform
// admin) asks that every value of one subject (a user id or a principal
// id) be replaced by a pseudonym in the organization's audit log and tool
// executions. The admin API records the request (pending); the lifecycle
// role applies it, counts what it changed, and wipes the subject's value
// from the record once the erasure is done or refused.

import (
	"time"

	"github.com/google/uuid"
)

// Erasure subject kinds.
const (
	ErasureUserID      = "user_id"
	ErasurePrincipalID = "principal_id"
)

// Erasure statuses.
const (
	ErasurePending = "pending"
	ErasureDone    = "done"
	ErasureRefused = "refused"
)

// Erasure is one request to erase a subject, at key ErasureKey(org, id).
// Subject is the only place its value is kept; no answer of the admin API
// and no audit event shows it.
type Erasure struct {
	ID          uuid.UUID `json:"id"`
	OrgID       uuid.UUID `json:"organization_id"`
	SubjectKind string    `json:"subject_kind"` // ErasureUserID or ErasurePrincipalID
	// Subject is the value to erase; "" once done or refused (the
	// lifecycle wipes it).
	Subject string `json:"subject,omitempty"`
	Reason  string `json:"reason"`
	// Pseudonym replaces the subject's value: "erased-" and 16 lowercase
	// hex digits from crypto/rand, chosen at creation.
	Pseudonym string `json:"pseudonym"`
	Status    string `json:"status"`
	// StatusMsg says why an erasure was refused or what it waits for.
	StatusMsg string `json:"status_msg,omitempty"`
	// AuditEntries and Executions are how many entries of each log the
	// lifecycle has changed so far.
	AuditEntries int64      `json:"audit_entries"`
	Executions   int64      `json:"executions"`
	CreatedAt    time.Time  `json:"created_at"`
	CreatedBy    string     `json:"created_by"` // principal id
	DoneAt       *time.Time `json:"done_at"`
}

// Pending reports whether the erasure waits for the lifecycle.
func (e Erasure) Pending() bool { return e.Status == ErasurePending }

// ErasureKey is the key of erasure id of org.
func ErasureKey(org, id string) string { return "erasure." + org + "." + id }

// ErasurePrefix is the prefix of the keys of org's erasures.
func ErasurePrefix(org string) string { return "erasure." + org + "." }

// erasuresPrefix is the prefix of the keys of every organization's
// erasures.
const erasuresPrefix = "erasure."

// Erasures returns every erasure of org, of any status, in key order.
func Erasures(s *State, org uuid.UUID) ([]Erasure, error) {
	return ListAs[Erasure](s, ErasurePrefix(org.String()))
}

// PendingErasures lists the pending erasures of every organization (the
// lifecycle's work list), in key order (by organization, then id).
func PendingErasures(s *State) ([]Erasure, error) {
	all, err := ListAs[Erasure](s, erasuresPrefix)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, e := range all {
		if e.Pending() {
			out = append(out, e)
		}
	}
	return out, nil
}
