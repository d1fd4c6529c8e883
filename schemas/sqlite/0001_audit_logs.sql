-- Audit entries of the embedded store. UUIDs are canonical lowercase strings,
-- whose byte order is the UUID order; timestamps are Unix milliseconds (UTC).
CREATE TABLE IF NOT EXISTS audit_logs (
    organization_id  TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    ts_ms            INTEGER NOT NULL,
    client_ip        TEXT,
    action           INTEGER NOT NULL,
    source           INTEGER NOT NULL,
    display_name     TEXT    NOT NULL,
    customer_id      TEXT,
    project_id       TEXT,
    principal_id     TEXT    NOT NULL,
    user_id          TEXT,
    principal_type   TEXT    NOT NULL,
    resource_type    INTEGER,
    resource_id      TEXT,
    resource_display TEXT,
    data             TEXT,
    created_ms       INTEGER NOT NULL,
    PRIMARY KEY (organization_id, event_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS audit_logs_org_time
    ON audit_logs (organization_id, ts_ms DESC, event_id DESC);

CREATE INDEX IF NOT EXISTS audit_logs_project_time
    ON audit_logs (organization_id, project_id, ts_ms DESC, event_id DESC);
