-- Whether the execution with this event id is stored for the organization
-- (and the project, when :project is not NULL): a point lookup on the
-- primary key (organization_id, event_id), as has_audit.sql.
SELECT EXISTS (
    SELECT 1
    FROM tool_executions
    WHERE organization_id = :org
      AND event_id = :id
      AND (:project IS NULL OR project_id = :project)
)
