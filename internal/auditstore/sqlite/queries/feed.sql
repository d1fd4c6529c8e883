{{/* What every feed query selects by: the organization (and project), the
     entries after the cursor up to the watermark, created_since, and the
     search's terms (search.sql). Arguments: :org, [:project], :after_seq,
     :after_created, :after_id, :upto, :created_since, the terms'. */ -}}
{{define "feed_where" -}}
WHERE organization_id = :org
{{- if .Project}}
  AND project_id = :project
{{- end}}
  AND (seq, created_ms, event_id) > (:after_seq, :after_created, :after_id)
  AND seq <= :upto
  AND (:created_since IS NULL OR created_ms >= :created_since)
{{- range .Terms}}
  AND {{template "term" .}}
{{- end}}
{{- end}}
