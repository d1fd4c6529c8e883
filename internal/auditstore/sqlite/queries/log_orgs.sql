SELECT organization_id FROM log_heads WHERE kind = ? AND size > 0
