-- The leaf indexes of a batch of event ids, sent as external data
-- (leaf_ids), matched on the whole primary key of log_leaf_ids; the newest
-- write of each (-1: withdrawn).
SELECT event_id, idx
FROM log_leaf_ids
WHERE (organization_id, kind, event_id) IN (SELECT organization_id, kind, event_id FROM leaf_ids)
ORDER BY event_id, ver DESC
LIMIT 1 BY event_id
