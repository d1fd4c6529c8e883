INSERT INTO lifecycle_keep (organization_id, kind, run, event_id)
