INSERT INTO log_hashes (organization_id, kind, idx, hash)
VALUES (?, ?, ?, ?)
