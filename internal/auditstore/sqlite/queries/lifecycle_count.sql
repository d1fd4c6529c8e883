{{/* The entries of a log's kind through a feed key: all, and those
     persisted before the cutoff (a range of the org's feed index). */ -}}
SELECT count(*), coalesce(sum(created_ms < :cutoff), 0)
FROM {{.Table}}
WHERE organization_id = :org
  AND (seq, created_ms, event_id) <= (:last_seq, :last_created, :last_id)
