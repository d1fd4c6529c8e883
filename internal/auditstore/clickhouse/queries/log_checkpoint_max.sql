-- The largest size of a log's checkpoints (reads one column of the log's
-- range; count() tells an empty log from a checkpoint of size 0).
SELECT max(size), count()
FROM log_checkpoints
WHERE organization_id = ? AND kind = ?
