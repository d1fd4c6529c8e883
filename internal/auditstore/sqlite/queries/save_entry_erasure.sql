INSERT OR REPLACE INTO entry_erasures (organization_id, kind, event_id, erasure_id, leaf_hash, fields) VALUES (?, ?, ?, ?, ?, ?)
