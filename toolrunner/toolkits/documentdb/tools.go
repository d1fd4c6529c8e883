package documentdb

import (
	"context"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/auditrail/auditrail/toolrunner"
)

func i64(v int64) *int64 { return &v }

func base(name, desc string, out string, params ...toolrunner.Param) toolrunner.Definition {
	return toolrunner.Definition{
		Toolkit: Name, Name: name, Version: Version, Description: desc, Parameters: params,
		Output: toolrunner.Output{Type: out},
		Metadata: toolrunner.Metadata{
			Classification: toolrunner.Classification{ServiceDomains: []string{"database"}},
			Behavior:       toolrunner.Behavior{Operations: []string{"read"}, ReadOnly: true, Idempotent: true, OpenWorld: true},
		},
		Requirements: toolrunner.Requirements{Secrets: []toolrunner.SecretRequirement{{Name: SecretName, Type: "password"}}},
	}
}

var (
	pDatabase   = toolrunner.Param{Name: "database_name", Type: toolrunner.TypeString, Required: true, Description: "The database (see DiscoverDatabases)."}
	pCollection = toolrunner.Param{Name: "collection_name", Type: toolrunner.TypeString, Required: true,
		Description: "The collection (see DiscoverCollections; call GetCollectionSchema before querying it)."}
	pFilter = toolrunner.Param{Name: "filter_dict", Type: toolrunner.TypeString,
		Description: `Filter as a JSON string (Extended JSON accepted: {"_id":{"$oid":"…"}}, {"at":{"$gte":{"$date":"2026-01-01T00:00:00Z"}}}); omitted matches all documents.`}
)

const usage = " Discover collections with DiscoverCollections and load the schema with GetCollectionSchema before querying; " +
	"give a projection and a sort (by _id when unsure) and filter on indexed fields."

func defDiscoverDatabases() toolrunner.Definition {
	return base("DiscoverDatabases", "List the databases of the instance (the server's own admin, config and local are left out). Start here.", toolrunner.TypeArray)
}

func defDiscoverCollections() toolrunner.Definition {
	return base("DiscoverCollections", "List the collections of a database. Call it before any tool that needs a collection name.", toolrunner.TypeArray, pDatabase)
}

func defSchema() toolrunner.Definition {
	return base("GetCollectionSchema", "Infer a collection's schema by sampling documents: each field as a dotted path with its types, a few sample values and how often it is null or missing. Load it before find or aggregate queries.",
		toolrunner.TypeJSON, pDatabase, pCollection,
		toolrunner.Param{Name: "sample_size", Type: toolrunner.TypeInteger, Default: int64(1000), Minimum: i64(1), Maximum: i64(10_000),
			Description: "Documents to sample (1 to 10,000)."})
}

func defFind() toolrunner.Definition {
	return base("FindDocuments", "Find documents; each is returned as a JSON string (relaxed Extended JSON)."+usage, toolrunner.TypeArray,
		pDatabase, pCollection, pFilter,
		toolrunner.Param{Name: "projection", Type: toolrunner.TypeString, Description: `JSON string; 1 includes, 0 excludes ({"name":1,"_id":0}); omitted returns all fields.`},
		toolrunner.Param{Name: "sort", Type: toolrunner.TypeArrayString, Description: `Each element a JSON string {"field":"…","direction":1 or -1}.`},
		toolrunner.Param{Name: "limit", Type: toolrunner.TypeInteger, Default: int64(1000), Minimum: i64(1), Maximum: i64(1000), Description: "At most this many documents (1 to 1000)."},
		toolrunner.Param{Name: "skip", Type: toolrunner.TypeInteger, Default: int64(0), Minimum: i64(0), Description: "Documents to skip."})
}

func defCount() toolrunner.Definition {
	return base("CountDocuments", "Count the documents that match a filter.", toolrunner.TypeInteger, pDatabase, pCollection, pFilter)
}

func defAggregate() toolrunner.Definition {
	return base("AggregateDocuments", "Run an aggregation pipeline (read-only stages: $match, $group, $project, $sort, $limit, $lookup and others; $out and $merge are refused); each result is a JSON string."+usage,
		toolrunner.TypeArray, pDatabase, pCollection,
		toolrunner.Param{Name: "pipeline", Type: toolrunner.TypeArrayString, Required: true, Description: `Each element one stage as a JSON string, e.g. {"$match":{"status":"paid"}}.`},
		toolrunner.Param{Name: "limit", Type: toolrunner.TypeInteger, Default: int64(1000), Minimum: i64(1), Maximum: i64(1000), Description: "At most this many results (a $limit is appended)."})
}

func (t *Toolkit) discoverDatabases(ctx context.Context, c *mongo.Client, _ map[string]any) (any, error) {
	names, err := c.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		return nil, upstream(err, "listing databases")
	}
	out := []string{}
	for _, n := range names {
		if !hiddenDatabases[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (t *Toolkit) discoverCollections(ctx context.Context, c *mongo.Client, in map[string]any) (any, error) {
	db := str(in, "database_name")
	if hiddenDatabases[db] {
		return nil, toolrunner.Errorf(toolrunner.KindNotFound, false, "database %q is not available", db)
	}
	dbs, err := c.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: db}})
	if err != nil {
		return nil, upstream(err, "listing databases")
	}
	if len(dbs) == 0 {
		return nil, toolrunner.Errorf(toolrunner.KindNotFound, false, "database %q does not exist; DiscoverDatabases lists them", db)
	}
	names, err := c.Database(db).ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return nil, upstream(err, "listing collections")
	}
	sort.Strings(names)
	return names, nil
}

func (t *Toolkit) readFilter(in map[string]any) (bson.D, error) {
	f, err := parseDoc("filter_dict", str(in, "filter_dict"))
	if err != nil {
		return nil, err
	}
	if err := checkReadOnly(f, true); err != nil {
		return nil, inputError("filter_dict: %v", err)
	}
	return f, nil
}

func (t *Toolkit) count(ctx context.Context, c *mongo.Client, in map[string]any) (any, error) {
	filter, err := t.readFilter(in)
	if err != nil {
		return nil, err
	}
	coll, err := t.collection(ctx, c, str(in, "database_name"), str(in, "collection_name"))
	if err != nil {
		return nil, err
	}
	n, err := coll.CountDocuments(ctx, filter, options.Count().SetMaxTime(t.cfg.MaxTime))
	if err != nil {
		return nil, upstream(err, "counting documents")
	}
	return n, nil
}

func (t *Toolkit) find(ctx context.Context, c *mongo.Client, in map[string]any) (any, error) {
	filter, err := t.readFilter(in)
	if err != nil {
		return nil, err
	}
	opts := options.Find().SetLimit(integer(in, "limit", 1000)).SetSkip(integer(in, "skip", 0)).SetMaxTime(t.cfg.MaxTime)
	if p := str(in, "projection"); p != "" {
		proj, err := parseDoc("projection", p)
		if err != nil {
			return nil, err
		}
		if err := checkReadOnly(proj, true); err != nil {
			return nil, inputError("projection: %v", err)
		}
		opts.SetProjection(proj)
	}
	if specs := stringList(in, "sort"); len(specs) > 0 {
		sortDoc := bson.D{}
		for i, s := range specs {
			var spec struct {
				Field     string `bson:"field"`
				Direction int    `bson:"direction"`
			}
			if err := bson.UnmarshalExtJSON([]byte(s), false, &spec); err != nil || spec.Field == "" || (spec.Direction != 1 && spec.Direction != -1) {
				return nil, inputError(`sort[%d]: want {"field":"…","direction":1 or -1}`, i)
			}
			sortDoc = append(sortDoc, bson.E{Key: spec.Field, Value: spec.Direction})
		}
		opts.SetSort(sortDoc)
	}
	coll, err := t.collection(ctx, c, str(in, "database_name"), str(in, "collection_name"))
	if err != nil {
		return nil, err
	}
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, upstream(err, "finding documents")
	}
	return docs(ctx, cur)
}

// docs renders every document of a cursor as relaxed Extended JSON.
func docs(ctx context.Context, cur *mongo.Cursor) ([]string, error) {
	defer cur.Close(ctx)
	out := []string{}
	for cur.Next(ctx) {
		s, err := toJSON(cur.Current)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if err := cur.Err(); err != nil {
		return nil, upstream(err, "reading documents")
	}
	return out, nil
}

func (t *Toolkit) aggregate(ctx context.Context, c *mongo.Client, in map[string]any) (any, error) {
	stages := stringList(in, "pipeline")
	pipeline := make(mongo.Pipeline, 0, len(stages)+1)
	for i, s := range stages {
		d, err := parseDoc(fmt.Sprintf("pipeline[%d]", i), s)
		if err != nil {
			return nil, err
		}
		if len(d) != 1 {
			return nil, inputError("pipeline[%d]: a stage is an object with exactly one key, like {\"$match\":{…}}", i)
		}
		if err := checkReadOnly(d, false); err != nil {
			return nil, inputError("pipeline[%d]: %v", i, err)
		}
		pipeline = append(pipeline, d)
	}
	pipeline = append(pipeline, bson.D{{Key: "$limit", Value: integer(in, "limit", 1000)}})
	coll, err := t.collection(ctx, c, str(in, "database_name"), str(in, "collection_name"))
	if err != nil {
		return nil, err
	}
	cur, err := coll.Aggregate(ctx, pipeline, options.Aggregate().SetMaxTime(t.cfg.MaxTime))
	if err != nil {
		return nil, upstream(err, "aggregating")
	}
	return docs(ctx, cur)
}
