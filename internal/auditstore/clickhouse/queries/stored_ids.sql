SELECT DISTINCT organization_id, event_id
FROM event_index
WHERE (organization_id, kind, event_id) IN (SELECT organization_id, kind, event_id FROM batch_ids)
