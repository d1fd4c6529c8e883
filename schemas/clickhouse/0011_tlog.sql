-- The tamper-evidence logs (issue 24): per organization, a Merkle log of its
-- audit entries (kind 0) and one of its tool executions (kind 1); see
-- internal/auditstore/tlog.go and internal/auditstore/clickhouse/tlog.go.
-- Retention may delete rows of audit_logs and tool_executions (the
-- entries' payloads) but NEVER rows of these tables: the leaf hashes and
-- tree hashes kept here are what inclusion and consistency proofs are made
-- of, for the entries that remain and for every checkpoint handed out.
--
-- No transactions and no unique keys here: every row carries ver (the
-- nanosecond of its write, above any earlier write of the same index) and
-- readers keep the newest per key (LIMIT 1 BY); ReplacingMergeTree folds
-- the copies in its merges. An append writes hashes, then leaves, then the
-- head: a log's size (log_heads) covers only rows fully written, and
-- rows above the size (an append that crashed) are overwritten by the next
-- append. Small granules (256 rows): proofs, list pages and the head read
-- points of the primary keys.

-- log_leaves: leaf idx of a log is the entry event_id, at its feed position
-- (seq, created_ms, event_id).
CREATE TABLE IF NOT EXISTS log_leaves (
    organization_id String,
    kind            UInt8,
    idx             Int64,
    event_id        String,
    seq             UInt64,
    created_ms      Int64,
    ver             UInt64
) ENGINE = ReplacingMergeTree(ver)
ORDER BY (organization_id, kind, idx)
SETTINGS index_granularity = 256;

-- log_leaf_ids: the leaves by event id (LeafIndexes), written by the view
-- in the insert of the leaves; idx -1 marks a mapping withdrawn (a leaf
-- above the size that a later append replaced with another event).
CREATE TABLE IF NOT EXISTS log_leaf_ids (
    organization_id String,
    kind            UInt8,
    event_id        String,
    idx             Int64,
    ver             UInt64
) ENGINE = ReplacingMergeTree(ver)
ORDER BY (organization_id, kind, event_id)
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS log_leaf_ids_mv TO log_leaf_ids AS
SELECT organization_id, kind, event_id, idx, ver
FROM log_leaves;

-- log_hashes: the tree's stored hashes (golang.org/x/mod/sumdb/tlog
-- StoredHashIndex numbering; the leaf hashes among them).
CREATE TABLE IF NOT EXISTS log_hashes (
    organization_id String,
    kind            UInt8,
    idx             Int64,
    hash            FixedString(32),
    ver             UInt64
) ENGINE = ReplacingMergeTree(ver)
ORDER BY (organization_id, kind, idx)
SETTINGS index_granularity = 256;

-- log_heads: a row per append, the log's size after it and its last leaf;
-- the largest size is the head (the merges keep only it).
CREATE TABLE IF NOT EXISTS log_heads (
    organization_id String,
    kind            UInt8,
    size            UInt64,
    event_id        String,
    seq             UInt64,
    created_ms      Int64
) ENGINE = ReplacingMergeTree(size)
ORDER BY (organization_id, kind)
SETTINGS index_granularity = 256;

-- log_checkpoints: signed checkpoints, the newest (time_ms) per size.
CREATE TABLE IF NOT EXISTS log_checkpoints (
    organization_id String,
    kind            UInt8,
    size            Int64,
    root            FixedString(32),
    time_ms         UInt64,
    key_id          String,
    note            String
) ENGINE = ReplacingMergeTree(time_ms)
ORDER BY (organization_id, kind, size)
SETTINGS index_granularity = 256
