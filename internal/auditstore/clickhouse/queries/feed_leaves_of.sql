-- The keys and leaves of the entries (kind 0) or executions (kind 1) of
-- the organizations in the external table orgs (organization_id), in feed
-- order (of the copies of a key the one with a leaf first, as
-- feed_keys.sql with LeafFirst), whose stream sequence is in a window:
-- from the smallest cursor's to the watermark. FeedLeavesOf keeps each
-- organization's after its own cursor, then one per event id (the first,
-- as feed_keys.sql's LIMIT 1 BY after its cursor). One range of the
-- primary key per organization, read once for all. Arguments: kind, the
-- window's first sequence, the watermark, the most rows.
SELECT organization_id, seq, created_ms, event_id, leaf
FROM feed_index
WHERE organization_id IN (SELECT organization_id FROM orgs) AND kind = ? AND scope = ''
  AND seq >= ? AND seq <= ?
ORDER BY organization_id, seq, created_ms, event_id, leaf DESC
LIMIT ?
