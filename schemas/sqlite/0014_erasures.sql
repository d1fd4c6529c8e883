-- The entries an erasure rewrote (internal/auditstore/lifecycle.go): the
-- erasure and the entry's original leaf hash (32 bytes), which the log
-- holds and the routes serve with the entry. kind: 0 audit, 1 executions.
CREATE TABLE IF NOT EXISTS entry_erasures (
    organization_id TEXT    NOT NULL,
    kind            INTEGER NOT NULL,
    event_id        TEXT    NOT NULL,
    erasure_id      TEXT    NOT NULL,
    leaf_hash       BLOB    NOT NULL,
    PRIMARY KEY (organization_id, kind, event_id)
) WITHOUT ROWID;
