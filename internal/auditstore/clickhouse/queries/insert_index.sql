INSERT INTO event_index (organization_id, kind, event_id, ts_ms)
