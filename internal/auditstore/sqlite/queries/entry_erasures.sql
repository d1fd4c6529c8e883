-- The erasures of some entries: points of the primary key (the ids listed in IN).
SELECT event_id, erasure_id, leaf_hash, fields
FROM entry_erasures
WHERE organization_id = ? AND kind = ? AND event_id IN ({{.}})
