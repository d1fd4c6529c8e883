{{/* The keys of the next chunk of a feed: up to a number of an
     organization's entries (kind 0) or executions (kind 1) of a scope (''
     or a project id) after the cursor and up to the watermark, in feed
     order. Arguments: org, kind, scope, the cursor (seq, seq, created_ms,
     created_ms, event_id), the watermark, [created_since], the chunk. With
     LeafFirst, of the copies of a key the one with a leaf comes first
     (an entry indexed by the views before and after 0018). */ -}}
{{define "feed_keys" -}}
SELECT {{.Columns}}
    FROM feed_index
    WHERE organization_id = ? AND kind = ? AND scope = ?
      AND (seq > ? OR (seq = ? AND (created_ms > ? OR (created_ms = ? AND event_id > ?))))
      AND seq <= ?
{{- if .Since}}
      AND created_ms >= ?
{{- end}}
    ORDER BY seq, created_ms, event_id{{if .LeafFirst}}, leaf DESC{{end}}
    LIMIT 1 BY event_id
    LIMIT ?
{{- end}}
{{- template "feed_keys" .}}
