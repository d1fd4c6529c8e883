-- Row limits enforced by the store itself: an audit entry's data (the JSON
-- object of the event) holds at most 1 MiB (1048576 bytes), as in SQLite
-- (sqlite/0010_row_limits.sql). ClickHouse 18.16 has no CHECK constraints: a
-- MATERIALIZED column is computed for every inserted row, and throwIf fails
-- the insert (code 395) when a row is over the limit. The column costs one
-- byte per row before compression and is never selected.
ALTER TABLE audit_logs ADD COLUMN data_within_limits UInt8 MATERIALIZED throwIf(length(ifNull(data, '')) > 1048576)
