-- Audit entries. Portable from ClickHouse 18.16 to current releases: no
-- DateTime64, TTL, LowCardinality or skip indexes. UUIDs are canonical
-- lowercase strings (their byte order is the UUID order, as in SQLite);
-- timestamps are Unix milliseconds. Redelivered events collapse on the sort
-- key; ver = 2^63 - created_ms keeps the first write, and readers also apply
-- LIMIT 1 BY event_id before merges have happened.
CREATE TABLE IF NOT EXISTS audit_logs (
    organization_id  String,
    ts_ms            Int64,
    event_id         String,
    id               String,
    client_ip        Nullable(String),
    action           UInt8,
    source           UInt8,
    display_name     String,
    customer_id      Nullable(String),
    project_id       Nullable(String),
    principal_id     String,
    user_id          Nullable(String),
    principal_type   String,
    resource_type    Nullable(UInt8),
    resource_id      Nullable(String),
    resource_display Nullable(String),
    data             Nullable(String),
    created_ms       Int64,
    ver              UInt64
) ENGINE = ReplacingMergeTree(ver)
PARTITION BY toYYYYMM(toDateTime(intDiv(ts_ms, 1000)))
ORDER BY (organization_id, ts_ms, event_id)
