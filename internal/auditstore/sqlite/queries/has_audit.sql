-- Whether the entry with this event id is stored for the organization (and
-- the project, when :project is not NULL): a point lookup on the primary key
-- (organization_id, event_id); the project is checked on the one row found.
SELECT EXISTS (
    SELECT 1
    FROM audit_logs
    WHERE organization_id = :org
      AND event_id = :id
      AND (:project IS NULL OR project_id = :project)
)
