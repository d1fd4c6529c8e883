INSERT INTO tool_executions (
    organization_id, event_id, execution_id, project_id, user_id,
    principal_id, principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
    started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms, client, salt, seq
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (organization_id, event_id) DO NOTHING
