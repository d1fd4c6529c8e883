INSERT INTO audit_logs (
    organization_id, ts_ms, event_id, id, client_ip, action, source, display_name,
    customer_id, project_id, principal_id, user_id, principal_type,
    resource_type, resource_id, resource_display, data, created_ms, salt, ver, seq, leaf
)
