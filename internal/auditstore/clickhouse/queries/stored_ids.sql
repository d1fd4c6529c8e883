SELECT DISTINCT organization_id, event_id
FROM event_index
WHERE organization_id IN ? AND kind = ? AND event_id IN ?
