{{/* The next step of an expiry: entries after a feed key and through the
     last one, persisted before the cutoff, in feed order (the org's feed
     index). */ -}}
SELECT seq, created_ms, event_id
FROM {{.Table}}
WHERE organization_id = :org
  AND (seq, created_ms, event_id) > (:after_seq, :after_created, :after_id)
  AND (seq, created_ms, event_id) <= (:last_seq, :last_created, :last_id)
  AND created_ms < :cutoff
ORDER BY seq, created_ms, event_id
LIMIT :limit
