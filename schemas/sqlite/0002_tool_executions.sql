-- Tool executions with the decisions of their hooks (execution/v1 events).
CREATE TABLE IF NOT EXISTS tool_executions (
    organization_id TEXT    NOT NULL,
    event_id        TEXT    NOT NULL,
    execution_id    TEXT    NOT NULL,
    project_id      TEXT    NOT NULL, -- '' when none
    user_id         TEXT    NOT NULL,
    toolkit         TEXT    NOT NULL,
    tool_name       TEXT    NOT NULL,
    tool_version    TEXT    NOT NULL,
    started_ms      INTEGER NOT NULL,
    ended_ms        INTEGER NOT NULL,
    duration_ms     REAL    NOT NULL,
    success         INTEGER NOT NULL,
    execution_code  TEXT    NOT NULL,
    execution_error TEXT    NOT NULL,
    error_kind      TEXT    NOT NULL,
    hooks           TEXT    NOT NULL,
    created_ms      INTEGER NOT NULL,
    PRIMARY KEY (organization_id, event_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tool_executions_org_time
    ON tool_executions (organization_id, started_ms DESC, event_id DESC);

CREATE INDEX IF NOT EXISTS tool_executions_project_time
    ON tool_executions (organization_id, project_id, started_ms DESC, event_id DESC);
