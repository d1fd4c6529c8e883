-- The tree hashes of the tamper-evidence logs as tiles (C2SP tlog-tiles,
-- golang.org/x/mod/sumdb/tlog tiles of height 8): a tile of level L, number
-- n, holds the hashes of the tree's nodes of level 8L numbered 256n to
-- 256n+255, and every other hash of levels 8L to 8L+7 above them is
-- computed from it. An append writes, for each tile it adds hashes to, one
-- segment: the hashes from position start (the tile's width before the
-- append) to its end within the tile, so that nothing is read before a
-- write and a row holds up to 256 hashes (log_hashes held one hash a row,
-- two rows an entry; a row costs the server to write and to merge whatever
-- its size). A tile is its segments in order of start, each the newest
-- write of its (level, n, start) (ReplacingMergeTree on ver): an append
-- that crashed left segments beyond the size, which the next append from
-- that size overwrites (same start, newer ver) or which no reader reaches
-- (readers stop at the size). log_hashes is written no more; its rows
-- serve the tiles of logs written before this migration where no segment
-- covers them.
CREATE TABLE IF NOT EXISTS log_tiles (
    organization_id String,
    kind            UInt8,
    level           UInt8,
    n               Int64,
    start           UInt16,
    hashes          String,
    ver             UInt64
) ENGINE = ReplacingMergeTree(ver)
ORDER BY (organization_id, kind, level, n, start)
SETTINGS index_granularity = 256
