{{/* The conditions of a search (the q parameter), one per term, joined by
     AND in the list queries. Every value is a named argument (.List: the
     term's values, .Pairs: an ip term's ranges; an IPv6 range holds no
     IPv4 address, whose 16-byte form starts with search.Mapped); nothing typed by
     a caller is ever part of the text. A negated term holds when its
     condition does not (a NULL column: the condition is false).
     auditrail_fold (Unicode lower case) and auditrail_ip16 (an address as
     the 32 hex digits of its 16-byte form, NULL for no address) are
     registered by this package. */ -}}
{{define "term"}}{{if .Not}}NOT coalesce(({{template "cond" .}}), 0){{else}}({{template "cond" .}}){{end}}{{end}}

{{define "cond" -}}
{{- if eq .Key "action"}}action IN ({{.List}})
{{- else if eq .Key "source"}}source IN ({{.List}})
{{- else if eq .Key "resource_type"}}resource_type IN ({{.List}})
{{- else if eq .Key "resource_id"}}resource_id IN ({{.List}})
{{- else if eq .Key "actor"}}principal_id IN ({{.List}}) OR user_id IN ({{.List}}) OR display_name IN ({{.List}})
{{- else if eq .Key "principal_type"}}principal_type IN ({{.List}})
{{- else if eq .Key "project"}}project_id IN ({{.List}})
{{- else if eq .Key "event_id"}}event_id IN ({{.List}})
{{- else if eq .Key "ip"}}{{range $i, $r := .Pairs}}{{if $i}} OR {{end}}(auditrail_ip16(client_ip) BETWEEN {{$r.Lo}} AND {{$r.Hi}}
         {{- if $r.V6}} AND substr(auditrail_ip16(client_ip), 1, 24) != '00000000000000000000FFFF'{{end}}){{end}}
{{- else if eq .Key "text"}}instr(auditrail_fold(display_name), {{.List}}) > 0
       OR instr(auditrail_fold(resource_display), {{.List}}) > 0
       OR instr(auditrail_fold(resource_id), {{.List}}) > 0
{{- else if eq .Key "tool"}}tool_name IN ({{.List}})
{{- else if eq .Key "toolkit"}}toolkit IN ({{.List}})
{{- else if eq .Key "user"}}user_id IN ({{.List}})
{{- else if eq .Key "success"}}success IN ({{.List}})
{{- else if eq .Key "error_kind"}}error_kind IN ({{.List}})
{{- else if eq .Key "hook_decision"}}{{range $i, $n := .Names}}{{if $i}} OR {{end}}instr(hooks, {{$n}}) > 0{{end}}
{{- else if eq .Key "exec_text"}}instr(auditrail_fold(display_name), {{.List}}) > 0
       OR instr(auditrail_fold(tool_name), {{.List}}) > 0
       OR instr(auditrail_fold(toolkit), {{.List}}) > 0
{{- else}}{{.Unknown}}
{{- end}}
{{- end}}
