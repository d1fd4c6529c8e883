INSERT INTO log_tiles (organization_id, kind, level, n, start, hashes, ver)
