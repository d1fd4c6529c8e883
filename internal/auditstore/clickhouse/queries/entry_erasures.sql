-- The erasures of some entries (0015): points of the sort key (the ids
-- listed in IN), the latest row of each (FINAL: an entry erased twice).
SELECT event_id, erasure_id, leaf_hash, fields
FROM entry_erasures FINAL
WHERE organization_id = ? AND kind = ? AND event_id IN ({{.}})
