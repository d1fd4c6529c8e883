INSERT INTO log_hashes (log_id, idx, hash)
VALUES (?, ?, ?)
