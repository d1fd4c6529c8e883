package schemas

import "embed"

// ClickHouseDDL holds the ClickHouse migrations, applied in name order.
//
//go:embed clickhouse/*.sql
var ClickHouseDDL embed.FS

// SQLiteDDL holds the SQLite migrations, applied in name order.
//
//go:embed sqlite/*.sql
var SQLiteDDL embed.FS

// OpenAPI holds the OpenAPI 3.0 descriptions of the HTTP APIs.
//
//go:embed openapi/*.yaml
var OpenAPI embed.FS
