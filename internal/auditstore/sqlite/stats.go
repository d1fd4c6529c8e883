package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"text/template"

	"github.com/auditrail/auditrail/internal/auditstore"
)

//go:embed queries/stats.sql
var statsTemplate string

// statsSQL holds the stats queries (buckets, actors, resources) for each
// key of the counts; the key's column is the template "key".
var statsSQL = map[auditstore.StatsKey]*template.Template{
	auditstore.ByAction:       statsTemplates("action"),
	auditstore.BySource:       statsTemplates("source"),
	auditstore.ByResourceType: statsTemplates("coalesce(resource_type, 0)"),
}

func statsTemplates(column string) *template.Template {
	t := listTemplate("stats.sql", statsTemplate)
	template.Must(t.New("key").Parse(column))
	return t
}

var _ auditstore.StatsStore = (*Store)(nil)

// Stats implements auditstore.StatsStore from the raw rows (an embedded
// store holds few enough of them): three queries, each a range of the
// time index.
func (s *Store) Stats(ctx context.Context, q auditstore.StatsQuery) (auditstore.Stats, error) {
	var out auditstore.Stats
	if err := q.Validate(); err != nil {
		return out, err
	}
	rows := func(name string) (*sql.Rows, error) {
		query, args, err := statsQuery(q, name)
		if err != nil {
			return nil, err
		}
		r, err := s.db.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlite stats %s: %w", name, err)
		}
		return r, nil
	}
	r, err := rows("buckets")
	if err != nil {
		return out, err
	}
	out.Buckets, err = auditstore.ReadBuckets(r)
	r.Close()
	if err != nil {
		return out, fmt.Errorf("sqlite stats: %w", err)
	}
	if r, err = rows("actors"); err != nil {
		return out, err
	}
	out.Actors, err = auditstore.ReadActors(r)
	r.Close()
	if err != nil {
		return out, fmt.Errorf("sqlite stats: %w", err)
	}
	if r, err = rows("resources"); err != nil {
		return out, err
	}
	out.Resources, err = auditstore.ReadResources(r)
	r.Close()
	if err != nil {
		return out, fmt.Errorf("sqlite stats: %w", err)
	}
	return out, nil
}

// statsQuery returns the stats query name (buckets, actors, resources) of
// q and its arguments.
func statsQuery(q auditstore.StatsQuery, name string) (string, []any, error) {
	query, args, err := render(statsSQL[q.By].Lookup(name), q.ProjectID, nil, q.Window, q.Search.Terms, "text")
	if err != nil {
		return "", nil, err
	}
	args = append(args,
		sql.Named("org", q.OrgID.String()),
		sql.Named("action", enumArg(q.Action)),
		sql.Named("source", enumArg(q.Source)),
		sql.Named("resource_type", enumArg(q.ResourceType)),
	)
	if name == "buckets" {
		return query, append(args, sql.Named("bucket", q.BucketMS())), nil
	}
	return query, append(args, sql.Named("top", q.Top)), nil
}
