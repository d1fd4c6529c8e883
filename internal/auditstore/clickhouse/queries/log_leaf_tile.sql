-- LeafTile: an event's leaf index among a log's first size leaves and the
-- stored hashes of its tile, in one query. The leaf is a scalar subquery
-- (a point of log_leaf_ids' primary key, the newest write; -1 when absent,
-- withdrawn ones are -1 too), computed once before the outer query (on a
-- cluster, by the node asked) and folded into it as a constant; the hashes
-- are a range of log_hashes' primary key around the tile of the leaf
-- (tile = the leaf rounded down to a multiple of the tile's leaves). The
-- tile's first stored hash is 2·tile − popcount(tile) and the next tile's
-- below 2·(tile + leaves); 18.16 has no bitCount, so the range starts 64
-- lower (a popcount is at most 64) and the store keeps the tile's hashes
-- exactly. Arguments: org, kind, event id, −(tile leaves), org, kind,
-- size, tile leaves, tlog.StoredHashCount(size).
WITH ifNull((SELECT idx FROM log_leaf_ids
             WHERE organization_id = ? AND kind = ? AND event_id = ?
             ORDER BY ver DESC
             LIMIT 1), -1) AS leaf,
     bitAnd(leaf, ?) AS tile
SELECT leaf, idx, hash
FROM log_hashes
WHERE organization_id = ? AND kind = ? AND leaf >= 0 AND leaf < ?
  AND idx >= 2 * tile - 64 AND idx < least(2 * (tile + ?), ?)
ORDER BY idx, ver DESC
LIMIT 1 BY idx
