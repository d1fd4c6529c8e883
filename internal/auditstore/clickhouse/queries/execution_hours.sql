-- The hourly execution counts of an organization (and project, '' = all) up to an hour, newest first.
SELECT hour, sum(n) AS n
FROM execution_hours
WHERE organization_id = ?
  AND (? = '' OR project_id = ?)
  AND hour <= ?
GROUP BY hour
ORDER BY hour DESC
