package documentdb

import (
	"context"
	"errors"
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
		Description: `Filter as a JSON string (Extended JSON accepted: {"_id":{"$oid":"…"}}, {"at":{"$gte":{"$date":"2026-01-01T00:00:00Z"}}}); exactly one object. Leave it out (not an empty string) to match all documents.`}
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
		toolrunner.Param{Name: "projection", Type: toolrunner.TypeString, Description: `JSON string; 1 includes, 0 excludes ({"name":1,"_id":0}); leave it out (not an empty string) to return all fields.`},
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

// Tools returns the six tools.
func (t *Toolkit) Tools() []toolrunner.Tool {
	return []toolrunner.Tool{
		tool[aggregateRequest]{t, defAggregate(), parseAggregate, t.aggregate},
		tool[countRequest]{t, defCount(), parseCount, t.count},
		tool[string]{t, defDiscoverCollections(), parseDatabase, t.discoverCollections},
		tool[struct{}]{t, defDiscoverDatabases(), func(map[string]any) (struct{}, error) { return struct{}{}, nil }, t.discoverDatabases},
		tool[findRequest]{t, defFind(), parseFind, t.find},
		tool[schemaRequest]{t, defSchema(), parseSchema, t.schema},
	}
}

// tool checks every input (parse) before it opens a client: a call with
// a bad input never reaches the server.
type tool[R any] struct {
	t     *Toolkit
	def   toolrunner.Definition
	parse func(in map[string]any) (R, error)
	run   func(ctx context.Context, c *mongo.Client, req R) (any, error)
}

func (x tool[R]) Definition() toolrunner.Definition { return x.def }

func (x tool[R]) Run(ctx context.Context, call toolrunner.Call) (any, error) {
	req, err := x.parse(call.Inputs)
	if err != nil {
		return nil, err
	}
	c, err := x.t.client(ctx, call.Secrets[SecretName])
	if err != nil {
		return nil, err
	}
	out, err := x.run(ctx, c, req)
	if ue, ok := errors.AsType[*upstreamError](err); ok {
		x.t.cfg.Log.Warn("database error", "toolkit", Name, "tool", x.def.Name, "err", ue.detail)
		return nil, ue.te
	}
	return out, err
}

// target is a database and one of its collections.
type target struct{ db, coll string }

func parseDatabase(in map[string]any) (string, error) { return name(in, "database_name") }

func parseTarget(in map[string]any) (target, error) {
	db, err := name(in, "database_name")
	if err != nil {
		return target{}, err
	}
	coll, err := name(in, "collection_name")
	if err != nil {
		return target{}, err
	}
	return target{db, coll}, nil
}

func (t *Toolkit) discoverDatabases(ctx context.Context, c *mongo.Client, _ struct{}) (any, error) {
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

func (t *Toolkit) discoverCollections(ctx context.Context, c *mongo.Client, db string) (any, error) {
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

// readOnlyDoc decodes an optional filter or projection and refuses
// operators that write or run code; absent is the empty document.
func readOnlyDoc(in map[string]any, param string) (bson.D, bool, error) {
	d, ok, err := optionalJSON(in, param)
	if err != nil || !ok {
		return bson.D{}, false, err
	}
	if err := checkReadOnly(d, true); err != nil {
		return nil, false, inputError("%s: %v", param, err)
	}
	return d, true, nil
}

type countRequest struct {
	target
	filter bson.D
}

func parseCount(in map[string]any) (countRequest, error) {
	tg, err := parseTarget(in)
	if err != nil {
		return countRequest{}, err
	}
	filter, _, err := readOnlyDoc(in, "filter_dict")
	return countRequest{tg, filter}, err
}

func (t *Toolkit) count(ctx context.Context, c *mongo.Client, req countRequest) (any, error) {
	coll, err := t.collection(ctx, c, req.db, req.coll)
	if err != nil {
		return nil, err
	}
	n, err := coll.CountDocuments(ctx, req.filter, options.Count().SetMaxTime(t.cfg.MaxTime))
	if err != nil {
		return nil, upstream(err, "counting documents")
	}
	return n, nil
}

type findRequest struct {
	target
	filter bson.D
	opts   *options.FindOptions
	limit  int64
}

func parseFind(in map[string]any) (findRequest, error) {
	tg, err := parseTarget(in)
	if err != nil {
		return findRequest{}, err
	}
	filter, _, err := readOnlyDoc(in, "filter_dict")
	if err != nil {
		return findRequest{}, err
	}
	opts := options.Find().SetLimit(integer(in, "limit", 1000)).SetSkip(integer(in, "skip", 0))
	proj, ok, err := readOnlyDoc(in, "projection")
	if err != nil {
		return findRequest{}, err
	}
	if ok {
		opts.SetProjection(proj)
	}
	if specs := stringList(in, "sort"); len(specs) > 0 {
		sortDoc := make(bson.D, 0, len(specs))
		for i, s := range specs {
			e, err := sortEntry(fmt.Sprintf("sort[%d]", i), s)
			if err != nil {
				return findRequest{}, err
			}
			sortDoc = append(sortDoc, e)
		}
		opts.SetSort(sortDoc)
	}
	return findRequest{tg, filter, opts, integer(in, "limit", 1000)}, nil
}

func (t *Toolkit) find(ctx context.Context, c *mongo.Client, req findRequest) (any, error) {
	coll, err := t.collection(ctx, c, req.db, req.coll)
	if err != nil {
		return nil, err
	}
	cur, err := coll.Find(ctx, req.filter, req.opts, options.Find().SetMaxTime(t.cfg.MaxTime))
	if err != nil {
		return nil, upstream(err, "finding documents")
	}
	return collect(ctx, mongoCursor{cur}, req.limit, t.cfg.MaxOutputBytes)
}

// mongoCursor is a *mongo.Cursor as collect reads it.
type mongoCursor struct{ *mongo.Cursor }

func (c mongoCursor) current() bson.Raw { return c.Current }

type aggregateRequest struct {
	target
	pipeline mongo.Pipeline
	limit    int64
}

func parseAggregate(in map[string]any) (aggregateRequest, error) {
	tg, err := parseTarget(in)
	if err != nil {
		return aggregateRequest{}, err
	}
	stages := stringList(in, "pipeline")
	pipeline := make(mongo.Pipeline, 0, len(stages)+1)
	for i, s := range stages {
		param := fmt.Sprintf("pipeline[%d]", i)
		d, err := decodeJSONParam(param, s)
		if err != nil {
			return aggregateRequest{}, err
		}
		if len(d) != 1 {
			return aggregateRequest{}, inputError("%s: a stage is an object with exactly one key, like {\"$match\":{…}}", param)
		}
		if err := checkReadOnly(d, false); err != nil {
			return aggregateRequest{}, inputError("%s: %v", param, err)
		}
		pipeline = append(pipeline, d)
	}
	limit := integer(in, "limit", 1000)
	pipeline = append(pipeline, bson.D{{Key: "$limit", Value: limit}})
	return aggregateRequest{tg, pipeline, limit}, nil
}

func (t *Toolkit) aggregate(ctx context.Context, c *mongo.Client, req aggregateRequest) (any, error) {
	coll, err := t.collection(ctx, c, req.db, req.coll)
	if err != nil {
		return nil, err
	}
	cur, err := coll.Aggregate(ctx, req.pipeline, options.Aggregate().SetMaxTime(t.cfg.MaxTime))
	if err != nil {
		return nil, upstream(err, "aggregating")
	}
	return collect(ctx, mongoCursor{cur}, req.limit, t.cfg.MaxOutputBytes)
}
