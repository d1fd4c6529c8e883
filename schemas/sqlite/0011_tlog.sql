-- The tamper-evidence logs (issue 24): per organization, a Merkle log of its
-- audit entries (kind 0) and one of its tool executions (kind 1); see
-- internal/auditstore/tlog.go. Retention may delete rows of audit_logs and
-- tool_executions (the entries' payloads) but NEVER rows of these tables:
-- the leaf hashes and tree hashes kept here are what inclusion and
-- consistency proofs are made of, for the entries that remain and for
-- every checkpoint already handed out.
--
-- log_leaves: leaf idx of a log is the entry event_id, at its feed position
-- (seq, created_ms, event_id). An event is in a log once.
CREATE TABLE IF NOT EXISTS log_leaves (
    organization_id TEXT    NOT NULL,
    kind            INTEGER NOT NULL,
    idx             INTEGER NOT NULL,
    event_id        TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    created_ms      INTEGER NOT NULL,
    PRIMARY KEY (organization_id, kind, idx)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS log_leaves_event ON log_leaves (organization_id, kind, event_id);

-- log_hashes: the tree's stored hashes (golang.org/x/mod/sumdb/tlog
-- StoredHashIndex numbering; the leaf hashes among them), 32 bytes each.
CREATE TABLE IF NOT EXISTS log_hashes (
    organization_id TEXT    NOT NULL,
    kind            INTEGER NOT NULL,
    idx             INTEGER NOT NULL,
    hash            BLOB    NOT NULL,
    PRIMARY KEY (organization_id, kind, idx)
) WITHOUT ROWID;

-- log_heads: each log's size and last leaf, written in the transaction
-- that appends the leaves (the sequencer resumes after it).
CREATE TABLE IF NOT EXISTS log_heads (
    organization_id TEXT    NOT NULL,
    kind            INTEGER NOT NULL,
    size            INTEGER NOT NULL,
    event_id        TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    created_ms      INTEGER NOT NULL,
    PRIMARY KEY (organization_id, kind)
) WITHOUT ROWID;

-- log_checkpoints: signed checkpoints, the newest one per size.
CREATE TABLE IF NOT EXISTS log_checkpoints (
    organization_id TEXT    NOT NULL,
    kind            INTEGER NOT NULL,
    size            INTEGER NOT NULL,
    root            BLOB    NOT NULL,
    time_ms         INTEGER NOT NULL,
    key_id          TEXT    NOT NULL,
    note            BLOB    NOT NULL,
    PRIMARY KEY (organization_id, kind, size)
) WITHOUT ROWID;
