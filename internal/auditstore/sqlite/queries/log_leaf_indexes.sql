-- The leaf indexes of the event ids of a JSON array (points of the unique
-- index log_leaves_event).
SELECT event_id, idx
FROM log_leaves
WHERE organization_id = ? AND kind = ? AND event_id IN (SELECT value FROM json_each(?))
