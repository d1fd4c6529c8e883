-- Row limits enforced by the store itself: an audit entry's data (the JSON
-- object of the event) holds at most 1 MiB (1048576 bytes). NATS carries
-- events up to its max payload (8 MiB), so a larger data object reaches
-- ingest; the store refuses its row (SQLITE_CONSTRAINT_TRIGGER) and ingest
-- dead-letters that event alone. The ClickHouse store has the same limit
-- (clickhouse/0010_row_limits.sql).
CREATE TRIGGER IF NOT EXISTS audit_logs_data_limit
BEFORE INSERT ON audit_logs
WHEN length(CAST(NEW.data AS BLOB)) > 1048576
-- (One line: migrations split statements on a semicolon that ends a line.)
BEGIN SELECT RAISE(ABORT, 'audit_logs.data longer than 1048576 bytes'); END;
