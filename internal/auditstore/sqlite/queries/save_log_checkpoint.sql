-- One checkpoint per size: a newer one (by time) replaces the stored one,
-- and so does the same one with more signature lines (witnesses'
-- cosignatures added later: a longer note of the same time).
INSERT INTO log_checkpoints (log_id, size, root, time_ms, key_id, note)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (log_id, size) DO UPDATE SET
    root = excluded.root, time_ms = excluded.time_ms, key_id = excluded.key_id, note = excluded.note
WHERE excluded.time_ms > log_checkpoints.time_ms
   OR (excluded.time_ms = log_checkpoints.time_ms AND excluded.root = log_checkpoints.root
       AND length(excluded.note) > length(log_checkpoints.note))
