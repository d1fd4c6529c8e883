-- Every log's size, for one kind (the checkpointer's round).
SELECT organization_id, size FROM log_heads WHERE kind = ? AND size > 0
