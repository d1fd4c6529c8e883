-- Benchmark data: count executions of one organization generated on the
-- server, rows first..first+count-1 of n spread over span_ms before now_ms,
-- newest first (row i starts at now_ms - i*span_ms/n). Arguments, in order:
-- organization_id, the five project ids (an array), now_ms, span_ms, n,
-- created_ms, ver, users, first, count. Every tenth execution failed; user
-- ids cycle over users. Portable to ClickHouse 18.16 (explicit column list).
INSERT INTO tool_executions (
    organization_id, event_id, execution_id, project_id, user_id,
    principal_id, principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
    started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms, ver
)
SELECT org, event_id, event_id, arrayElement(projects, toUInt32(i % 5) + 1), concat('user_', toString(i % users)),
       concat('key_', toString(i % 50)), 'API_KEY', 'bench', '10.0.0.1', 'DocumentDbToolkit', 'FindDocuments', '0.4.0',
       started_ms, started_ms + 12, 12.5, ok, if(ok = 1, 'OK', 'TOOL_ERROR'), if(ok = 1, '', 'upstream timeout'),
       if(ok = 1, '', 'TOOL_RUNTIME_ERROR'),
       '[{"hook_id":"h1","hook_name":"policy","point":"pre","code":"OK","error_message":"","http_status":200,"attempts":1,"latency_ms":1.25,"failure":"","failure_mode_applied":"","decision":"allow","overridden":false}]',
       created, ver
FROM (
    SELECT ? AS org, ? AS projects, ? AS now_ms, ? AS span_ms, ? AS n, ? AS created, ? AS ver, ? AS users,
           number + ? AS i,
           lower(hex(MD5(concat(org, toString(i))))) AS h,
           concat(substring(h, 1, 8), '-', substring(h, 9, 4), '-', substring(h, 13, 4), '-', substring(h, 17, 4), '-', substring(h, 21, 12)) AS event_id,
           toInt64(now_ms - intDiv(i * span_ms, n)) AS started_ms,
           toUInt8(i % 10 != 0) AS ok
    FROM numbers(?)
)
