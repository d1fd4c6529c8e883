package auditstore

import (
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/auditrail/auditrail/schemas"
)

func TestLoadMigrations(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_b.sql": {Data: []byte("-- only a comment;\nCREATE TABLE b (x INT);\n")},
		"m/0001_a.sql": {Data: []byte("-- header\nCREATE TABLE a (x INT);\n\nCREATE INDEX i ON a (x);\n")},
		"m/README":     {Data: []byte("ignored")},
	}
	got, err := LoadMigrations(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []Migration{
		{Name: "0001_a", Statements: []string{"-- header\nCREATE TABLE a (x INT)", "CREATE INDEX i ON a (x)"}},
		{Name: "0002_b", Statements: []string{"CREATE TABLE b (x INT)"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestEmbeddedMigrationsParse(t *testing.T) {
	for _, dir := range []string{"clickhouse", "sqlite"} {
		fsys := schemas.ClickHouseDDL
		if dir == "sqlite" {
			fsys = schemas.SQLiteDDL
		}
		ms, err := LoadMigrations(fsys, dir)
		if err != nil || len(ms) == 0 || len(ms[0].Statements) == 0 {
			t.Fatalf("%s: %v %v", dir, ms, err)
		}
	}
}
