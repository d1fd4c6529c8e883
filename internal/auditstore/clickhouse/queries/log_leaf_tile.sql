-- LeafTile: an event's leaf index among a log's first size leaves and the
-- segments of its tile of level 0, in one query. The leaf is a scalar
-- subquery (a point of log_leaf_ids' primary key, the newest write; -1
-- when absent, withdrawn ones are -1 too), computed once before the outer
-- query (on a cluster, by the node asked) and folded into it as a
-- constant; the tile's number is the same read as a set (IN: the primary
-- key's analysis of ClickHouse 18.16 uses a set, not a scalar subquery),
-- so that the segments are a range of log_tiles' primary key. No row: no such leaf, or a tile written
-- before log_tiles (read otherwise).
-- Arguments: org, kind, event id, org, kind, org, kind, event id, size.
WITH ifNull((SELECT idx FROM log_leaf_ids
             WHERE organization_id = ? AND kind = ? AND event_id = ?
             ORDER BY ver DESC
             LIMIT 1), -1) AS leaf
SELECT leaf, start, hashes
FROM log_tiles
WHERE organization_id = ? AND kind = ? AND level = 0
  AND n IN (SELECT intDiv(idx, 256) FROM log_leaf_ids
            WHERE organization_id = ? AND kind = ? AND event_id = ?
            ORDER BY ver DESC
            LIMIT 1)
  AND leaf >= 0 AND leaf < ?
ORDER BY start, ver DESC
LIMIT 1 BY start
