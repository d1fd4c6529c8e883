-- The expiries of each log (retention, internal/auditstore/lifecycle.go;
-- the SQLite table is sqlite/0013_lifecycle.sql): the leaves
-- 0..below_leaf-1 whose entries persisted before cutoff_ms and held by no
-- legal hold were deleted, as the expiry record (the audit entry record,
-- at record_leaf of the organization's audit log) says. The newest
-- (largest record_leaf) is the log's horizon; done is 0 while its deletion
-- is under way (a cycle that crashed resumes it). holds: a JSON array of
-- the legal holds' ids. A log is (organization_id, kind), as in 0011.
--
-- Saving a record again replaces it: ReplacingMergeTree on ver, which the
-- store sets to the save's time in nanoseconds with the top bit set when
-- done, so that a finished expiry wins over an earlier save whatever the
-- clocks; readers order by ver as well (before the merges fold the copies).
CREATE TABLE IF NOT EXISTS log_expiries (
    organization_id String,
    kind            UInt8,
    record_leaf     Int64,
    record          String,
    below_leaf      Int64,
    last_seq        UInt64,
    last_created_ms Int64,
    last_event_id   String,
    cutoff_ms       Int64,
    retention_ms    Int64,
    kept            Int64,
    expired         Int64,
    holds           String,
    time_ms         Int64,
    done            UInt8,
    ver             UInt64
) ENGINE = ReplacingMergeTree(ver)
ORDER BY (organization_id, kind, record_leaf)
SETTINGS index_granularity = 256;

-- The entries an expiry keeps (legal holds, the expiry records), when
-- they are too many to be written into the deletions themselves
-- (internal/auditstore/clickhouse/lifecycle.go): one run of DeleteExpired
-- writes them under its run id, its deletions read them back (event_id NOT
-- IN (SELECT …)), and it deletes them once every deletion is done. A
-- retried insert folds (every column is in the sort key).
CREATE TABLE IF NOT EXISTS lifecycle_keep (
    organization_id String,
    kind            UInt8,
    run             String,
    event_id        String
) ENGINE = ReplacingMergeTree
ORDER BY (organization_id, kind, run, event_id)
