-- How many copies of the entry with this event id are stored for the
-- organization (and project, '' = any) with lo <= ts_ms < hi (0: none).
-- The sort key is (organization_id, ts_ms, event_id): an event id alone
-- would read every granule of the organization, so the caller bounds the
-- time (auditstore.LookupWindow: ±10 minutes around the time in a UUIDv7
-- id, else the last hour) and the key prunes to the granules of that window.
-- Arguments: org, lo, hi, id, project, project.
SELECT count()
FROM audit_logs
WHERE organization_id = ?
  AND ts_ms >= ? AND ts_ms < ?
  AND event_id = ?
  AND (? = '' OR ifNull(project_id, '') = ?)
