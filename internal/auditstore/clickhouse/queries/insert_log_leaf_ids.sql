INSERT INTO log_leaf_ids (organization_id, kind, event_id, idx, ver)
