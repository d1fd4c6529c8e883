package auditstore

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Migration is one embedded .sql file split into statements.
type Migration struct {
	Name       string
	Statements []string
}

// LoadMigrations reads the .sql files of dir in fsys in name order and splits
// each into statements on semicolons that end a line. Comment lines are kept
// inside statements (both SQL dialects accept them) but a statement made only
// of comments is dropped.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations %s: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		m := Migration{Name: strings.TrimSuffix(e.Name(), ".sql")}
		for _, stmt := range splitStatements(string(b)) {
			m.Statements = append(m.Statements, stmt)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func splitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		onlyComments := true
		for _, line := range strings.Split(s, "\n") {
			l := strings.TrimSpace(line)
			if l != "" && !strings.HasPrefix(l, "--") {
				onlyComments = false
			}
		}
		if !onlyComments {
			out = append(out, s)
		}
	}
	for _, line := range strings.SplitAfter(sql, "\n") {
		trimmed := strings.TrimRight(line, " \t\r\n")
		if strings.HasSuffix(trimmed, ";") {
			cur.WriteString(strings.TrimSuffix(trimmed, ";"))
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return out
}
