{{/* One expired entry. */ -}}
DELETE FROM {{.Table}} WHERE organization_id = ? AND event_id = ?
