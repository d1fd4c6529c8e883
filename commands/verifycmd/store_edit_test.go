package verifycmd

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/testenv"
)

// The editors of the tamper tests: someone with write access to a store
// edits it behind the log's back, with the store's own tools (SQL on the
// SQLite file; mutations and inserts on the ClickHouse server).

// swapped are the columns of an entry's contents that swap exchanges.
var swapped = []string{"display_name", "principal_id", "principal_type", "action", "source", "resource_type", "resource_id", "resource_display", "data", "ts_ms"}

// sqliteEditor edits the SQLite file (one connection: its temporary
// tables last).
type sqliteEditor struct{ db *sql.DB }

func openSQLiteEdited(t *testing.T) (onlineStore, storeEditor) {
	path := filepath.Join(t.TempDir(), "audit.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return st, sqliteEditor{db}
}

func (e sqliteEditor) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	res, err := e.db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n == 0 && !strings.HasPrefix(q, "CREATE") {
		t.Fatalf("%s: no row changed", q)
	}
}

func (e sqliteEditor) deleteEntry(t *testing.T, org uuid.UUID, id string) {
	e.exec(t, `DELETE FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org.String(), id)
}

func (e sqliteEditor) rename(t *testing.T, org uuid.UUID, id, name string) {
	e.exec(t, `UPDATE audit_logs SET display_name = ? WHERE organization_id = ? AND event_id = ?`, name, org.String(), id)
}

func (e sqliteEditor) swap(t *testing.T, org uuid.UUID, a, b string) {
	cols := strings.Join(swapped, ", ")
	e.exec(t, `CREATE TEMP TABLE swap_a AS SELECT `+cols+` FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org.String(), a)
	e.exec(t, `UPDATE audit_logs SET (`+cols+`) = (SELECT `+cols+` FROM audit_logs b WHERE b.organization_id = ?1 AND b.event_id = ?3)
		WHERE organization_id = ?1 AND event_id = ?2`, org.String(), a, b)
	e.exec(t, `UPDATE audit_logs SET (`+cols+`) = (SELECT `+cols+` FROM swap_a) WHERE organization_id = ? AND event_id = ?`, org.String(), b)
	e.exec(t, `DROP TABLE swap_a`)
}

func (e sqliteEditor) insertCopy(t *testing.T, org uuid.UUID, id string) {
	e.exec(t, `CREATE TEMP TABLE copy_x AS SELECT * FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org.String(), id)
	e.exec(t, `UPDATE copy_x SET event_id = ?, id = ?, display_name = 'Mallory', created_ms = created_ms - 3600000`, uuid.NewString(), uuid.NewString())
	e.exec(t, `INSERT INTO audit_logs SELECT * FROM copy_x`)
	e.exec(t, `DROP TABLE copy_x`)
}

func (e sqliteEditor) deleteCheckpoints(t *testing.T, org uuid.UUID, above int64) {
	e.exec(t, `DELETE FROM log_checkpoints WHERE log_id = (SELECT log_id FROM log_heads WHERE organization_id = ? AND kind = 0) AND size > ?`, org.String(), above)
}

// clickhouseEditor edits the server's tables: ALTER … UPDATE and DELETE
// (mutations, waited for) and INSERT … SELECT, which the materialized
// views index as they would an insert of ingest.
type clickhouseEditor struct{ conn driver.Conn }

func openClickHouseEdited(t *testing.T) (onlineStore, storeEditor) {
	dsn := testenv.ClickHouse(t)
	st, err := clickhouse.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return st, clickhouseEditor{conn}
}

func (e clickhouseEditor) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if err := e.conn.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// mutate runs an ALTER … UPDATE or DELETE of table and waits until it is
// done: mutations run in the background, and 18.16 has no mutations_sync.
func (e clickhouseEditor) mutate(t *testing.T, table, q string, args ...any) {
	t.Helper()
	e.exec(t, "ALTER TABLE "+table+" "+q, args...)
	testenv.Eventually(t, 30*time.Second, "ALTER TABLE "+table+" "+q+" done", func() bool {
		var pending uint64
		if err := e.conn.QueryRow(context.Background(), `SELECT count() FROM system.mutations
			WHERE database = currentDatabase() AND table = ? AND is_done = 0`, table).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
}

// count is the number of rows of table that where keeps.
func (e clickhouseEditor) count(t *testing.T, table, where string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := e.conn.QueryRow(context.Background(), "SELECT count() FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e clickhouseEditor) deleteEntry(t *testing.T, org uuid.UUID, id string) {
	e.mutate(t, "audit_logs", `DELETE WHERE organization_id = ? AND event_id = ?`, org.String(), id)
	if n := e.count(t, "audit_logs", "organization_id = ? AND event_id = ?", org.String(), id); n != 0 {
		t.Fatalf("entry %s: %d rows after the delete", id, n)
	}
}

func (e clickhouseEditor) rename(t *testing.T, org uuid.UUID, id, name string) {
	e.mutate(t, "audit_logs", `UPDATE display_name = ? WHERE organization_id = ? AND event_id = ?`, name, org.String(), id)
	if n := e.count(t, "audit_logs", "organization_id = ? AND event_id = ? AND display_name = ?", org.String(), id, name); n == 0 {
		t.Fatalf("entry %s: not renamed", id)
	}
}

// swap exchanges the columns one at a time, each set to the other row's
// value. ts_ms is in the sorting key, which a mutation may not change, and
// 18.16 refuses to UPDATE a Nullable column (a type error in its own if):
// the swapped entries keep their times and their Nullable columns.
func (e clickhouseEditor) swap(t *testing.T, org uuid.UUID, a, b string) {
	for _, col := range swapped {
		typ := e.typeOf(t, col)
		if col == "ts_ms" || strings.HasPrefix(typ, "Nullable(") {
			continue
		}
		read := func(id string) (v *string) {
			if err := e.conn.QueryRow(context.Background(), `SELECT toString(`+col+`) FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org.String(), id).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		va, vb := read(a), read(b)
		set := fmt.Sprintf(`UPDATE %s = CAST(? AS %s) WHERE organization_id = ? AND event_id = ?`, col, typ)
		e.mutate(t, "audit_logs", set, vb, org.String(), a)
		e.mutate(t, "audit_logs", set, va, org.String(), b)
	}
}

func (e clickhouseEditor) typeOf(t *testing.T, col string) string {
	var typ string
	if err := e.conn.QueryRow(context.Background(), `SELECT type FROM system.columns WHERE database = currentDatabase() AND table = 'audit_logs' AND name = ?`, col).Scan(&typ); err != nil {
		t.Fatal(err)
	}
	return typ
}

// insertCopy inserts a copy of the row with every column named, as
// DESCRIBE lists them (the MATERIALIZED ones are computed).
func (e clickhouseEditor) insertCopy(t *testing.T, org uuid.UUID, id string) {
	rows, err := e.conn.Query(context.Background(), `DESCRIBE TABLE audit_logs`)
	if err != nil {
		t.Fatal(err)
	}
	var cols, exprs []string
	for rows.Next() {
		vals := make([]any, len(rows.ColumnTypes()))
		var name, typ, kind string
		vals[0], vals[1], vals[2] = &name, &typ, &kind
		for i := 3; i < len(vals); i++ {
			vals[i] = new(string)
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		if kind == "MATERIALIZED" || kind == "ALIAS" {
			continue
		}
		expr := name
		switch name {
		case "event_id":
			expr = "'" + uuid.NewString() + "'"
		case "id":
			expr = "'" + uuid.NewString() + "'"
		case "display_name":
			expr = "'Mallory'"
		case "created_ms":
			expr = "created_ms - 3600000"
		}
		cols, exprs = append(cols, name), append(exprs, expr)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	e.exec(t, `INSERT INTO audit_logs (`+strings.Join(cols, ", ")+`) SELECT `+strings.Join(exprs, ", ")+
		` FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org.String(), id)
}

func (e clickhouseEditor) deleteCheckpoints(t *testing.T, org uuid.UUID, above int64) {
	e.mutate(t, "log_checkpoints", `DELETE WHERE organization_id = ? AND kind = 0 AND size > ?`, org.String(), above)
}
