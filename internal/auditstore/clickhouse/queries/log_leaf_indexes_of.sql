-- The newest mapping of each (organization, kind, event id) of the
-- external table leaf_ids found in log_leaf_ids (withdrawn ones as -1):
-- the events of several logs' appends (AppendLogs).
SELECT organization_id, kind, event_id, idx
FROM log_leaf_ids
WHERE (organization_id, kind, event_id) IN (SELECT organization_id, kind, event_id FROM leaf_ids)
ORDER BY organization_id, kind, event_id, ver DESC
LIMIT 1 BY organization_id, kind, event_id
