-- Every log's size, for one kind (the checkpointer's round): the largest
-- size of each log (one row per log and unmerged part).
SELECT organization_id, max(size) FROM log_heads WHERE kind = ? AND size > 0 GROUP BY organization_id
