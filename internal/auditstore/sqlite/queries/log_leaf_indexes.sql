-- The leaf indexes of the event ids of a JSON array (the log's number by
-- the unique key of log_heads, then points of log_leaves_event).
SELECT f.event_id, f.idx
FROM log_heads AS l
JOIN log_leaves AS f ON f.log_id = l.log_id
WHERE l.organization_id = ? AND l.kind = ? AND f.event_id IN (SELECT value FROM json_each(?))
