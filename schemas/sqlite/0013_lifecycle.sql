-- The expiries of each log (retention, internal/auditstore/lifecycle.go):
-- the leaves 0..below_leaf-1 whose entries persisted before cutoff_ms and
-- held by no legal hold were deleted, as the expiry record (the audit
-- entry record, at record_leaf of the organization's audit log) says. The
-- newest (largest record_leaf) is the log's horizon; done is 0 while its
-- deletion is under way (a cycle that crashed resumes it). holds: a JSON
-- array of the legal holds' ids.
CREATE TABLE IF NOT EXISTS log_expiries (
    log_id          INTEGER NOT NULL,
    record_leaf     INTEGER NOT NULL,
    record          TEXT    NOT NULL,
    below_leaf      INTEGER NOT NULL,
    last_seq        INTEGER NOT NULL,
    last_created_ms INTEGER NOT NULL,
    last_event_id   TEXT    NOT NULL,
    cutoff_ms       INTEGER NOT NULL,
    retention_ms    INTEGER NOT NULL,
    kept            INTEGER NOT NULL,
    expired         INTEGER NOT NULL,
    holds           TEXT    NOT NULL,
    time_ms         INTEGER NOT NULL,
    done            INTEGER NOT NULL,
    PRIMARY KEY (log_id, record_leaf)
) WITHOUT ROWID;
