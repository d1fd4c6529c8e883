{{/* The conditions of a search (the q parameter), one per term, joined by
     AND in the inner query of the list queries. Every value is a ?
     argument: .List is "?, ?, …", one per value, and each use of .List
     takes the values again, in order (search.go appends them so and
     checks the count); an ip term takes lo and hi per range
     (.Pairs), a hook_decision term one text per value. A negated term
     holds when its condition does not (a NULL column: the condition is
     false). Addresses compare as the 32 hex digits of their 16-byte form
     (IPv4 as ::ffff:a.b.c.d); an IPv6 range holds no IPv4 address (whose
     form starts with search.Mapped); a missing or malformed address (one
     that does not read back: 18.16 has no toIPv4OrNull) matches no range. */ -}}
{{/* The filters of an audit listing (action, source, resource_type, then
     the search's terms): one "AND" condition each, in the order of their
     arguments. Used by list_audit.sql, stats.sql and feed_audit.sql. */ -}}
{{define "audit_filters" -}}
{{- if .Action}}
  AND action = ?
{{- end}}
{{- if .Source}}
  AND source = ?
{{- end}}
{{- if .ResourceType}}
  AND resource_type = ?
{{- end}}
{{- range .Terms}}
  AND {{template "term" .}}
{{- end}}
{{- end}}

{{/* The filters of an execution listing (success, user_id, then the
     search's terms), as audit_filters. Used by list_executions.sql and
     feed_executions.sql. */ -}}
{{define "execution_filters" -}}
{{- if .Success}}
  AND success = ?
{{- end}}
{{- if .User}}
  AND user_id = ?
{{- end}}
{{- range .Terms}}
  AND {{template "term" .}}
{{- end}}
{{- end}}

{{define "term"}}{{if .Not}}NOT ifNull(({{template "cond" .}}), 0){{else}}ifNull(({{template "cond" .}}), 0){{end}}{{end}}

{{define "ip16" -}}
hex(if(position(ifNull(client_ip, ''), ':') > 0,
       IPv6StringToNum(ifNull(client_ip, '')), IPv4ToIPv6(IPv4StringToNum(ifNull(client_ip, '')))))
{{- end}}

{{define "cond" -}}
{{- if eq .Key "action"}}action IN ({{.List}})
{{- else if eq .Key "source"}}source IN ({{.List}})
{{- else if eq .Key "resource_type"}}resource_type IN ({{.List}})
{{- else if eq .Key "resource_id"}}resource_id IN ({{.List}})
{{- else if eq .Key "actor"}}principal_id IN ({{.List}}) OR user_id IN ({{.List}}) OR display_name IN ({{.List}})
{{- else if eq .Key "principal_type"}}principal_type IN ({{.List}})
{{- else if eq .Key "project"}}project_id IN ({{.List}})
{{- else if eq .Key "event_id"}}event_id IN ({{.List}})
{{- else if eq .Key "ip"}}ifNull(client_ip, '') != ''
       AND if(position(ifNull(client_ip, ''), ':') > 0,
              hex(IPv6StringToNum(ifNull(client_ip, ''))) != '00000000000000000000000000000000' OR client_ip = '::',
              IPv4NumToString(IPv4StringToNum(ifNull(client_ip, ''))) = client_ip)
       AND ({{range $i, $v6 := .Pairs}}{{if $i}} OR {{end}}({{template "ip16"}} BETWEEN ? AND ?
         {{- if $v6}} AND substring({{template "ip16"}}, 1, 24) != '00000000000000000000FFFF'{{end}}){{end}})
{{- else if eq .Key "text"}}positionCaseInsensitiveUTF8(display_name, {{.List}}) > 0
       OR positionCaseInsensitiveUTF8(ifNull(resource_display, ''), {{.List}}) > 0
       OR positionCaseInsensitiveUTF8(ifNull(resource_id, ''), {{.List}}) > 0
{{- else if eq .Key "tool"}}tool_name IN ({{.List}})
{{- else if eq .Key "toolkit"}}toolkit IN ({{.List}})
{{- else if eq .Key "user"}}user_id IN ({{.List}})
{{- else if eq .Key "success"}}success IN ({{.List}})
{{- else if eq .Key "error_kind"}}error_kind IN ({{.List}})
{{- else if eq .Key "hook_decision"}}{{range $i, $n := .Names}}{{if $i}} OR {{end}}position(hooks, ?) > 0{{end}}
{{- else if eq .Key "exec_text"}}positionCaseInsensitiveUTF8(display_name, {{.List}}) > 0
       OR positionCaseInsensitiveUTF8(tool_name, {{.List}}) > 0
       OR positionCaseInsensitiveUTF8(toolkit, {{.List}}) > 0
{{- else}}{{.Unknown}}
{{- end}}
{{- end}}
