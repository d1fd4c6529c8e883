INSERT INTO audit_logs (
    organization_id, event_id, id, ts_ms, client_ip, action, source, display_name,
    customer_id, project_id, principal_id, user_id, principal_type,
    resource_type, resource_id, resource_display, data, created_ms, salt, seq
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (organization_id, event_id) DO NOTHING
