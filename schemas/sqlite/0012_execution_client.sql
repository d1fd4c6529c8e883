-- The client program of a tool execution (issue 25: an MCP client's name
-- and version), as the JSON of execution/v1's optional `client`
-- ({"protocol","name","version"}); '' when the event has none (the HTTP
-- API, and every execution stored before).
ALTER TABLE tool_executions ADD COLUMN client TEXT NOT NULL DEFAULT '';
