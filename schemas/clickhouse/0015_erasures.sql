-- The entries an erasure rewrote (internal/auditstore/lifecycle.go; the
-- SQLite table is sqlite/0014_erasures.sql): the erasure and the entry's
-- original leaf hash (leaf_hash: its 32 bytes), which the log holds and
-- the routes serve with the entry, so that the verifier can place a leaf
-- whose entry no longer hashes to it. kind: 0 audit, 1 executions. An
-- entry erased again keeps the latest erasure: readers read FINAL (the
-- row inserted last wins; the leaf hash is the same in every copy).
CREATE TABLE IF NOT EXISTS entry_erasures (
    organization_id String,
    kind            UInt8,
    event_id        String,
    erasure_id      String,
    leaf_hash       String
) ENGINE = ReplacingMergeTree
ORDER BY (organization_id, kind, event_id)
SETTINGS index_granularity = 1024
