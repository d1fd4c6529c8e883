package schemas

import "strings"

// The default durable consumers of ingest, whose acknowledgements say what
// the store holds: the feeds and the tamper-evidence logs follow them.
const (
	IngestAuditDurable     = "auditrail-ingest-audit"
	IngestExecutionDurable = "auditrail-ingest-execution"
)

// Stream and subject names of the event stream (CONTRACT.md "Event stream").
const (
	StreamEvents = "AUDITRAIL_EVENTS"
	StreamDLQ    = "AUDITRAIL_DLQ"

	SubjectEventsAll = "auditrail.events.>"
	SubjectAuditAll  = "auditrail.events.*.audit"
	SubjectExecAll   = "auditrail.events.*.execution"
	// SubjectCheckpointAll: the tamper-evidence log's signed checkpoints
	// (issue 24), on each organization's subjects so that whoever follows
	// an organization gets them in the stream. Not an entry: ingest,
	// the sequencer and the OCSF format leave them alone.
	SubjectCheckpointAll = "auditrail.events.*.checkpoint"
	SubjectDLQAll        = "auditrail.dlq.>"

	// StreamCommits says which organizations' logs have entries stored
	// since the tamper-evidence log's sequencer last looked: ingest
	// publishes CommitSubject(org, kind) (an empty message) after each
	// store write and before its acks, and the stream keeps the newest
	// message of each subject only, so it holds at most one message per
	// organization and kind. The sequencer follows it instead of every
	// event (a message per batch and organization, not per event).
	StreamCommits     = "AUDITRAIL_COMMITS"
	SubjectCommitsAll = "auditrail.committed.>"

	KindAudit     = "audit"
	KindExecution = "execution"
	// KindCheckpoint: the body is a C2SP signed note (a tlog checkpoint),
	// Content-Type ContentTextPlain, Auditrail-Schema SchemaCheckpointV1.
	KindCheckpoint = "checkpoint"

	SchemaAuditV1      = "audit/v1"
	SchemaExecutionV1  = "execution/v1"
	SchemaCheckpointV1 = "checkpoint/v1"

	HeaderMsgID       = "Nats-Msg-Id"
	HeaderContentType = "Content-Type"
	HeaderSchema      = "Auditrail-Schema"
	ContentMsgpack    = "application/msgpack"
	ContentTextPlain  = "text/plain; charset=utf-8"

	// Headers set on dead letters.
	HeaderDLQReason    = "Auditrail-Dlq-Reason"
	HeaderDLQSubject   = "Auditrail-Dlq-Subject"
	HeaderDLQStreamSeq = "Auditrail-Dlq-Stream-Seq"
	// HeaderDLQMsgID is the dead message's own Nats-Msg-Id (its event id),
	// kept for a replay; the dead letter's Nats-Msg-Id is its own.
	HeaderDLQMsgID = "Auditrail-Dlq-Msg-Id"
)

// EventSubject is auditrail.events.<org_id>.<kind>.
func EventSubject(orgID, kind string) string {
	return "auditrail.events." + orgID + "." + kind
}

// CommitSubject is auditrail.committed.<org_id>.<kind>: ingest stored
// entries of that kind of the organization (StreamCommits).
func CommitSubject(orgID, kind string) string {
	return "auditrail.committed." + orgID + "." + kind
}

// ParseCommitSubject splits auditrail.committed.<org_id>.<kind>.
func ParseCommitSubject(subject string) (org, kind string, ok bool) {
	return parseOrgKind(subject, "auditrail.committed.")
}

// DLQSubject is the dead-letter subject of a message that arrived on subject:
// auditrail.dlq.<org_id>.<kind> for event subjects, auditrail.dlq.unknown otherwise.
func DLQSubject(subject string) string {
	org, kind, ok := ParseEventSubject(subject)
	if !ok {
		return "auditrail.dlq.unknown"
	}
	return "auditrail.dlq." + org + "." + kind
}

// ParseEventSubject splits auditrail.events.<org_id>.<kind>.
func ParseEventSubject(subject string) (org, kind string, ok bool) {
	return parseOrgKind(subject, "auditrail.events.")
}

// parseOrgKind splits <prefix><org_id>.<kind>.
func parseOrgKind(subject, prefix string) (org, kind string, ok bool) {
	rest, found := strings.CutPrefix(subject, prefix)
	if !found {
		return "", "", false
	}
	org, kind, found = strings.Cut(rest, ".")
	if !found || org == "" || kind == "" || strings.Contains(kind, ".") {
		return "", "", false
	}
	return org, kind, true
}
