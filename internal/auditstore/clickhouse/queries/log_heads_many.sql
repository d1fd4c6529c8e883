-- The heads of the logs of one kind of the organizations in the external
-- table orgs (organization_id): each log's row of the largest size, as
-- log_head.sql reads one (a sequencer's round: one read for every log).
-- Arguments: kind.
SELECT organization_id, size, event_id, seq, created_ms
FROM log_heads
WHERE organization_id IN (SELECT organization_id FROM orgs) AND kind = ?
ORDER BY organization_id, size DESC
LIMIT 1 BY organization_id
