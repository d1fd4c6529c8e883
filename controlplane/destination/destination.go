// Package destination is the model of an organization's push destinations
// as the control plane stores them and the delivery role reads them, and
// the status the delivery role reports: what both share, without the admin
// API.
package destination

import (
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore/search"
)

// Destination types and formats (CONTRACT.md "Delivery to pollers and SIEMs").
const (
	DestHTTPS     = "https"
	DestSplunkHEC = "splunk_hec"
	FormatJSON    = "json"
	FormatOCSF    = "ocsf"
)

// Destination is an organization's push destination. The secret (https:
// the HMAC key of Auditrail-Signature) and the token (splunk_hec) are
// sealed in Sealed and never returned.
type Destination struct {
	ID     uuid.UUID `json:"id"`
	OrgID  uuid.UUID `json:"organization_id"`
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	URL    string    `json:"url"`
	Format string    `json:"format"`
	Q      string    `json:"q"`
	Paused bool      `json:"paused"`
	// Generation counts the replays: the delivery role keeps one consumer
	// per generation, starting at StartAt (the creation, then each
	// replay's since).
	Generation int       `json:"generation"`
	StartAt    time.Time `json:"start_at"`
	// SecretSet and TokenSet say which secrets are sealed.
	SecretSet bool      `json:"secret_set"`
	TokenSet  bool      `json:"token_set"`
	Sealed    []byte    `json:"sealed,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// DestinationSecrets are the sealed part of a Destination.
type DestinationSecrets struct {
	Secret string `json:"secret,omitempty"`
	Token  string `json:"token,omitempty"`
}

// ResolvedDestination is a destination with its secrets opened, for the
// delivery role. Err is set (and the secrets empty) when they do not open
// here (a key this process lacks): the destination exists, but this
// process cannot deliver it.
type ResolvedDestination struct {
	Destination
	Secret, Token string
	Err           error
}

// DeliverBucket is the KV bucket that the delivery role alone writes
// (natsx.DeliverBucket): status.<destination id>, lease.<destination id>,
// instance.<instance id>.
const DeliverBucket = "auditrail_deliver"

// DeliveryStatusKey is the key of a destination's status in DeliverBucket.
func DeliveryStatusKey(id uuid.UUID) string { return "status." + id.String() }

// Delivery states of DeliveryStatus.State.
const (
	DeliveryActive  = "active"  // delivering, or caught up
	DeliveryFailing = "failing" // the last attempt failed; retried with back-off
	DeliveryPaused  = "paused"
	// DeliveryStarting: no delivery instance has reported on it yet.
	DeliveryStarting = "starting"
)

// DeliveryStatus is what the delivery role reports of a destination.
// Pending counts the events matching the destination's subjects that are
// not yet acknowledged by the receiver (before the q filter); OldestPending
// is the stream time of the first of them. Failures counts the failed
// attempts since the last success; LastError is generic (a status code, a
// timeout, a refused address), never a body or a secret.
type DeliveryStatus struct {
	State           string     `json:"state"`
	Generation      int        `json:"generation"`
	Instance        string     `json:"instance"`
	LastDeliveredAt *time.Time `json:"last_delivered_at"`
	Pending         uint64     `json:"pending"`
	OldestPending   *time.Time `json:"oldest_pending,omitempty"`
	Failures        int        `json:"failures"`
	LastError       string     `json:"last_error"`
	Delivered       uint64     `json:"delivered"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// Filter parses a destination's q: the search language of the
// listings, as a search of audit entries, of executions, or both (free
// text alone). It returns the query of each kind it parses as (nil for a
// kind it does not apply to: those events are not delivered); an empty q
// delivers everything. An error when it parses as neither.
func Filter(q string) (audit, executions *search.Query, err error) {
	qa, errA := search.Parse(search.Audit, q)
	qe, errE := search.Parse(search.Executions, q)
	if errA != nil && errE != nil {
		return nil, nil, errA
	}
	if errA == nil {
		audit = &qa
	}
	if errE == nil {
		executions = &qe
	}
	return audit, executions, nil
}
