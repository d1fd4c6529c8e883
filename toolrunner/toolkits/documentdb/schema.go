package documentdb

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/bsontype"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/auditrail/auditrail/toolrunner"
)

// FieldSchema is what sampling learned of one field.
type FieldSchema struct {
	Path    string         `json:"path"`
	Types   map[string]int `json:"types"`
	Present int            `json:"present"`
	Nulls   int            `json:"nulls"`
	Missing int            `json:"missing"`
	Samples []string       `json:"samples"`
}

// Schema is the output of GetCollectionSchema.
type Schema struct {
	Database         string        `json:"database"`
	Collection       string        `json:"collection"`
	DocumentsSampled int           `json:"documents_sampled"`
	Sampling         string        `json:"sampling"`
	Fields           []FieldSchema `json:"fields"`
	Message          string        `json:"message,omitempty"`
}

const maxSamples = 3

var typeNames = map[bsontype.Type]string{
	bsontype.Double: "double", bsontype.String: "string", bsontype.EmbeddedDocument: "object", bsontype.Array: "array",
	bsontype.Binary: "binData", bsontype.ObjectID: "objectId", bsontype.Boolean: "bool", bsontype.DateTime: "date",
	bsontype.Null: "null", bsontype.Regex: "regex", bsontype.Int32: "int", bsontype.Timestamp: "timestamp",
	bsontype.Int64: "long", bsontype.Decimal128: "decimal", bsontype.MinKey: "minKey", bsontype.MaxKey: "maxKey",
	bsontype.Undefined: "undefined", bsontype.JavaScript: "javascript", bsontype.Symbol: "symbol",
}

func typeName(t bsontype.Type) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return t.String()
}

type schemaRequest struct {
	target
	size int64
}

func parseSchema(in map[string]any) (schemaRequest, error) {
	tg, err := parseTarget(in)
	return schemaRequest{tg, integer(in, "sample_size", 1000)}, err
}

// schema samples documents with $sample, or reads the first documents when
// the server has no $sample (FerretDB v1), and infers their fields.
func (t *Toolkit) schema(ctx context.Context, c *mongo.Client, req schemaRequest) (any, error) {
	db, name := req.db, req.coll
	coll, err := t.collection(ctx, c, db, name)
	if err != nil {
		return nil, err
	}
	size := min(req.size, t.cfg.MaxSampleSize)
	out := Schema{Database: db, Collection: name, Sampling: "$sample", Fields: []FieldSchema{}}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$sample", Value: bson.D{{Key: "size", Value: size}}}}}, options.Aggregate().SetMaxTime(t.cfg.MaxTime))
	if err != nil {
		var ce mongo.CommandError
		if !(asCommandError(err, &ce) && (ce.Code == 115 || ce.Code == 238 || strings.Contains(ce.Message, "not implemented"))) {
			return nil, upstream(err, "sampling documents")
		}
		out.Sampling = "the first documents (the server has no $sample)"
		if cur, err = coll.Find(ctx, bson.D{}, options.Find().SetLimit(size).SetMaxTime(t.cfg.MaxTime)); err != nil {
			return nil, upstream(err, "reading documents")
		}
	}
	defer cur.Close(ctx)
	fields := map[string]*FieldSchema{}
	for cur.Next(ctx) {
		if out.DocumentsSampled >= int(size) {
			return nil, toolrunner.Errorf(toolrunner.KindUpstream, false, "the database answered more than the %d documents asked for", size)
		}
		if err := checkDepth(cur.Current); err != nil {
			return nil, err
		}
		out.DocumentsSampled++
		walk(cur.Current, "", fields, map[string]bool{})
	}
	if len(fields) >= maxFields {
		out.Message = fmt.Sprintf("the sample has more than %d distinct field paths; only the first %d are described", maxFields, maxFields)
	}
	if err := cur.Err(); err != nil {
		return nil, upstream(err, "reading documents")
	}
	if out.DocumentsSampled == 0 {
		out.Message = "collection " + name + " is empty: there is no document to infer a schema from"
		return out, nil
	}
	for _, f := range fields {
		// Fields first seen in a later document were missing from the earlier ones.
		f.Missing = out.DocumentsSampled - f.Present
		out.Fields = append(out.Fields, *f)
	}
	sort.Slice(out.Fields, func(i, j int) bool { return out.Fields[i].Path < out.Fields[j].Path })
	return out, nil
}

func asCommandError(err error, ce *mongo.CommandError) bool {
	e, ok := err.(mongo.CommandError)
	if ok {
		*ce = e
	}
	return ok
}

// walk records every field of doc under prefix; arrays record their
// elements under path[].
func walk(doc bson.Raw, prefix string, fields map[string]*FieldSchema, seen map[string]bool) {
	elems, err := doc.Elements()
	if err != nil {
		return
	}
	for _, e := range elems {
		record(prefix+e.Key(), e.Value(), fields, seen)
	}
}

func record(path string, v bson.RawValue, fields map[string]*FieldSchema, seen map[string]bool) {
	f := fields[path]
	if f == nil {
		if len(fields) >= maxFields {
			return
		}
		f = &FieldSchema{Path: path, Types: map[string]int{}, Samples: []string{}}
		fields[path] = f
	}
	if !seen[path] {
		seen[path] = true
		f.Present++
	}
	f.Types[typeName(v.Type)]++
	switch v.Type {
	case bsontype.Null:
		f.Nulls++
	case bsontype.EmbeddedDocument:
		walk(v.Document(), path+".", fields, seen)
	case bsontype.Array:
		vals, _ := v.Array().Values()
		for _, el := range vals {
			record(path+"[]", el, fields, seen)
		}
	default:
		if len(f.Samples) < maxSamples {
			s := sample(v)
			for _, have := range f.Samples {
				if have == s {
					return
				}
			}
			f.Samples = append(f.Samples, s)
		}
	}
}

// sample renders a scalar as relaxed Extended JSON, shortened.
func sample(v bson.RawValue) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return typeName(v.Type)
	}
	s := strings.TrimSuffix(strings.TrimPrefix(string(b), `{"v":`), "}")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
