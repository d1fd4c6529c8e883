-- The leaves stored beside an organization's entries (kind 0) or
-- executions (kind 1) of a range of stream sequences, by feed position
-- (0013_feed_leaves.sql). Arguments: org, kind, the first and the last
-- sequence.
SELECT seq, created_ms, event_id, leaf
FROM feed_leaves
WHERE organization_id = ? AND kind = ? AND seq >= ? AND seq <= ?
