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
