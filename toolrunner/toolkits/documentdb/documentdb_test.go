package documentdb

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/ferret"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
)

type fixed struct{ uri string }

func (fixed) Hooks(context.Context, uuid.UUID, uuid.UUID) ([]hookproxy.Hook, error) { return nil, nil }
func (f fixed) SecretValue(_, _, name string) (string, error) {
	if name == SecretName && f.uri != "" {
		return f.uri, nil
	}
	return "", errors.New("no secret")
}
func (fixed) Connection(context.Context, string, string, string, string) (oauthflow.Connection, error) {
	return oauthflow.Connection{}, oauthflow.ErrNotConnected
}
func (fixed) ConnectionStatus(_, _, _, _ string) (bool, []string) { return false, nil }
func (fixed) AuthorizationURL(context.Context, string, string, string, string, []string) (string, time.Time, error) {
	return "", time.Time{}, oauthflow.ErrNoProvider
}

type env struct {
	tk     *Toolkit
	runner *toolrunner.Runner
	uri    string
	sc     toolrunner.Scope
}

// newEnv runs FerretDB with the sample database and a tool runner whose
// project secret points at it.
func newEnv(t *testing.T, uri string) *env {
	t.Helper()
	if uri == "" {
		srv, err := ferret.Start(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := ferret.Seed(ctx, srv.URI); err != nil {
			t.Fatal(err)
		}
		uri = srv.URI
	}
	_, nc, _ := testenv.NATS(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ConnectTimeout = time.Second
	cfg.Egress = egress.AllowLoopback() // FerretDB is on 127.0.0.1
	tk := New(cfg)
	t.Cleanup(func() { tk.Close(context.Background()) })
	reg := toolrunner.NewRegistry()
	if err := reg.Register(tk.Tools()...); err != nil {
		t.Fatal(err)
	}
	r := toolrunner.New(toolrunner.DefaultConfig(), reg, hookproxy.New(hookproxy.DefaultConfig(), nil), fixed{uri}, fixed{uri}, fixed{uri}, pub, nil)
	return &env{tk: tk, runner: r, uri: uri, sc: toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "u"}}
}

func (e *env) run(t *testing.T, tool string, in map[string]any) toolrunner.Result {
	t.Helper()
	res, err := e.runner.Execute(context.Background(), e.sc, Name+"."+tool, in)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func (e *env) ok(t *testing.T, tool string, in map[string]any) any {
	t.Helper()
	res := e.run(t, tool, in)
	if !res.Success {
		t.Fatalf("%s %v: %+v", tool, in, res.Error)
	}
	return res.Output
}

func docsOf(t *testing.T, out any) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, s := range out.([]string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("not JSON: %s", s)
		}
		docs = append(docs, m)
	}
	return docs
}

func TestDefinitions(t *testing.T) {
	tk := New(DefaultConfig())
	names := []string{}
	for _, tool := range tk.Tools() {
		d := tool.Definition()
		names = append(names, d.Name)
		if d.Version != "0.4.0" || d.Toolkit != "DocumentDbToolkit" || !d.Metadata.Behavior.ReadOnly || !d.Metadata.Behavior.OpenWorld ||
			len(d.Requirements.Secrets) != 1 || d.Requirements.Secrets[0].Name != "DB_CONNECTION_STRING" || d.Requirements.Secrets[0].Type != "password" {
			t.Errorf("%s: %+v", d.Name, d)
		}
	}
	if strings.Join(names, ",") != "AggregateDocuments,CountDocuments,DiscoverCollections,DiscoverDatabases,FindDocuments,GetCollectionSchema" {
		t.Fatalf("tools %v", names)
	}
	if !strings.Contains(defFind().Description, "DiscoverCollections") || !strings.Contains(defFind().Description, "GetCollectionSchema") {
		t.Error("usage rules missing from descriptions")
	}
}

func TestToolsOnFerretDB(t *testing.T) {
	e := newEnv(t, "")
	shop := map[string]any{"database_name": "shop"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{"database_name": "shop"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	dbs := e.ok(t, "DiscoverDatabases", nil).([]string)
	if len(dbs) == 0 || dbs[0] != "shop" {
		t.Fatalf("databases %v", dbs)
	}
	for _, d := range dbs {
		if hiddenDatabases[d] {
			t.Fatalf("%s listed", d)
		}
	}
	if cols := e.ok(t, "DiscoverCollections", shop).([]string); strings.Join(cols, ",") != "customers,orders,products" {
		t.Fatalf("collections %v", cols)
	}
	count := func(filter string) int64 {
		in := with(map[string]any{"collection_name": "orders", "filter_dict": filter})
		if filter == "" { // omitted counts all; an empty string is refused (TestBadInputsEveryTool)
			delete(in, "filter_dict")
		}
		return e.ok(t, "CountDocuments", in).(int64)
	}
	if n := count(""); n != 120 {
		t.Fatalf("count all %d", n)
	}
	if n := count(`{"status":"paid"}`); n != 48 {
		t.Fatalf("count paid %d", n)
	}
	if n := count(`{"created_at":{"$gte":{"$date":"2026-01-30T00:00:00Z"}}}`); n == 0 || n >= 120 {
		t.Fatalf("count by date %d", n)
	}

	found := docsOf(t, e.ok(t, "FindDocuments", with(map[string]any{"collection_name": "orders", "filter_dict": `{"status":"shipped"}`,
		"projection": `{"status":1,"total":1,"created_at":1}`, "sort": []any{`{"field":"created_at","direction":-1}`}, "limit": 5.0, "skip": 1.0})))
	if len(found) != 5 || found[0]["status"] != "shipped" || found[0]["items"] != nil {
		t.Fatalf("find: %v", found)
	}
	oid := found[0]["_id"].(map[string]any)["$oid"].(string)
	if _, ok := found[0]["created_at"].(map[string]any)["$date"]; !ok {
		t.Fatalf("date not relaxed Extended JSON: %v", found[0]["created_at"])
	}
	byID := docsOf(t, e.ok(t, "FindDocuments", with(map[string]any{"collection_name": "orders", "filter_dict": `{"_id":{"$oid":"` + oid + `"}}`})))
	if len(byID) != 1 {
		t.Fatalf("find by ObjectId: %d", len(byID))
	}
	// ($slice in a projection passes the read-only check (TestCheckReadOnly)
	// but FerretDB v1 does not implement it; MongoDB does.)

	agg := docsOf(t, e.ok(t, "AggregateDocuments", with(map[string]any{"collection_name": "orders", "limit": 3.0, "pipeline": []any{
		`{"$match":{"status":{"$in":["paid","shipped"]}}}`, `{"$group":{"_id":"$status","n":{"$sum":1}}}`, `{"$sort":{"_id":1}}`}})))
	if len(agg) != 2 || agg[0]["_id"] != "paid" || agg[0]["n"] != 48.0 || agg[1]["n"] != 24.0 {
		t.Fatalf("aggregate: %v", agg)
	}
	if a := docsOf(t, e.ok(t, "AggregateDocuments", with(map[string]any{"collection_name": "orders", "limit": 2.0, "pipeline": []any{`{"$match":{}}`}}))); len(a) != 2 {
		t.Fatalf("aggregate limit: %d", len(a))
	}

	sch := e.ok(t, "GetCollectionSchema", with(map[string]any{"collection_name": "customers", "sample_size": 100.0})).(Schema)
	paths := map[string]FieldSchema{}
	for _, f := range sch.Fields {
		paths[f.Path] = f
	}
	if sch.DocumentsSampled != 40 || paths["address.city"].Types["string"] != 40 || paths["_id"].Types["objectId"] != 40 ||
		paths["phone"].Nulls != 5 || paths["phone"].Missing != 35 || len(paths["name"].Samples) != 3 || paths["signed_up"].Types["date"] != 40 {
		t.Fatalf("schema: %+v", sch)
	}
	items := e.ok(t, "GetCollectionSchema", with(map[string]any{"collection_name": "orders"})).(Schema)
	found2 := false
	for _, f := range items.Fields {
		if f.Path == "items[].sku" && f.Types["string"] > 0 {
			found2 = true
		}
	}
	if !found2 {
		t.Fatalf("nested array paths: %+v", items.Fields)
	}
	// An empty collection.
	c, _ := mongo.Connect(context.Background(), options.Client().ApplyURI(e.uri))
	defer c.Disconnect(context.Background())
	if err := c.Database("shop").CreateCollection(context.Background(), "empty"); err != nil {
		t.Fatal(err)
	}
	if s := e.ok(t, "GetCollectionSchema", with(map[string]any{"collection_name": "empty"})).(Schema); s.DocumentsSampled != 0 || !strings.Contains(s.Message, "empty") {
		t.Fatalf("empty collection: %+v", s)
	}
	if len(e.tk.clients) != 1 {
		t.Fatalf("%d clients for one connection string", len(e.tk.clients))
	}
}

func TestRefusalsAndErrors(t *testing.T) {
	e := newEnv(t, "")
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"database_name": "shop", "collection_name": "orders"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		tool  string
		in    map[string]any
		kind  string
		retry bool
		msg   string
	}{
		{"AggregateDocuments", base(map[string]any{"pipeline": []any{`{"$out":"stolen"}`}}), toolrunner.KindInputInvalid, false, "$out"},
		{"AggregateDocuments", base(map[string]any{"pipeline": []any{`{"$facet":{"a":[{"$merge":{"into":"x"}}]}}`}}), toolrunner.KindInputInvalid, false, "$merge"},
		{"AggregateDocuments", base(map[string]any{"pipeline": []any{`{"$match":{"$expr":{"$function":{"body":"1","args":[],"lang":"js"}}}}`}}), toolrunner.KindInputInvalid, false, "$function"},
		{"FindDocuments", base(map[string]any{"filter_dict": `{"$where":"sleep(1000)"}`}), toolrunner.KindInputInvalid, false, "$where"},
		{"CountDocuments", base(map[string]any{"filter_dict": `{"$set":{"status":"x"}}`}), toolrunner.KindInputInvalid, false, "$set"},
		{"FindDocuments", base(map[string]any{"filter_dict": `{"status":`}), toolrunner.KindInputInvalid, false, "filter_dict"},
		{"AggregateDocuments", base(map[string]any{"pipeline": []any{`not json`}}), toolrunner.KindInputInvalid, false, "pipeline[0]"},
		{"AggregateDocuments", base(map[string]any{"pipeline": []any{`{"$match":{},"$sort":{"a":1}}`}}), toolrunner.KindInputInvalid, false, "exactly one key"},
		{"FindDocuments", base(map[string]any{"sort": []any{`{"field":"a","direction":2}`}}), toolrunner.KindInputInvalid, false, "sort[0]"},
		{"CountDocuments", map[string]any{"database_name": "shop", "collection_name": "nope"}, toolrunner.KindNotFound, false, "nope"},
		{"CountDocuments", map[string]any{"database_name": "nowhere", "collection_name": "x"}, toolrunner.KindNotFound, false, "nowhere"},
		{"DiscoverCollections", map[string]any{"database_name": "admin"}, toolrunner.KindNotFound, false, "admin"},
	}
	for _, tc := range tests {
		res := e.run(t, tc.tool, tc.in)
		if res.Success || res.Error.Kind != tc.kind || res.Error.CanRetry != tc.retry || !strings.Contains(res.Error.Message, tc.msg) {
			t.Errorf("%s %v: %+v", tc.tool, tc.in, res.Error)
		}
	}
	// Reads that look like writes are fine: accumulators and $sort inside $facet.
	// (FerretDB v1 lacks the $max, $min, $push and $addToSet accumulators;
	// TestCheckReadOnly shows the check lets them through for MongoDB.)
	e.ok(t, "AggregateDocuments", base(map[string]any{"pipeline": []any{`{"$set":{"x":1}}`, `{"$project":{"status":1}}`}}))
	// Bounds are input errors (400 at the API), naming the parameter.
	for _, tc := range []struct {
		tool, param string
		v           float64
	}{{"FindDocuments", "limit", 0}, {"FindDocuments", "limit", 1001}, {"FindDocuments", "skip", -1}, {"AggregateDocuments", "limit", 5000}, {"GetCollectionSchema", "sample_size", 20_000}} {
		in := base(map[string]any{tc.param: tc.v})
		if tc.tool == "AggregateDocuments" {
			in["pipeline"] = []any{}
		}
		if _, err := e.runner.Execute(context.Background(), e.sc, Name+"."+tc.tool, in); !errors.Is(err, toolrunner.ErrInvalidInput) || !strings.Contains(err.Error(), tc.param) {
			t.Errorf("%s %s=%v: %v", tc.tool, tc.param, tc.v, err)
		}
	}
}

func TestUnreachableAndBadConnectionString(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	e := newEnv(t, "mongodb://"+addr+"/?serverSelectionTimeoutMS=500")
	res := e.run(t, "DiscoverDatabases", nil)
	if res.Success || res.Error.Kind != toolrunner.KindUpstream || !res.Error.CanRetry {
		t.Fatalf("unreachable: %+v", res.Error)
	}
	bad := newEnv(t, "postgres://not-mongo")
	res = bad.run(t, "DiscoverDatabases", nil)
	if res.Success || res.Error.Kind != "CONFIGURATION_ERROR" || res.Error.CanRetry || strings.Contains(res.Error.Message, "postgres://") {
		t.Fatalf("bad connection string: %+v", res.Error)
	}
}

// Values FerretDB v1 does not store (Decimal128) serialize like the rest.
func TestExtendedJSONOfEveryType(t *testing.T) {
	dec, _ := primitive.ParseDecimal128("12.50")
	id := uuid.MustParse("0b3c8f4e-2a6d-4c1e-9f00-1a2b3c4d5e6f")
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: primitive.NewObjectID()}, {Key: "at", Value: primitive.NewDateTimeFromTime(time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC))},
		{Key: "price", Value: dec}, {Key: "blob", Value: primitive.Binary{Subtype: 0, Data: []byte{1, 2, 3}}},
		{Key: "uuid", Value: primitive.Binary{Subtype: 4, Data: id[:]}}, {Key: "n", Value: int64(1) << 40},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := toJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"$oid"`, `"$date":"2026-11-21T10:04:05Z"`, `"$numberDecimal":"12.50"`, `"$binary"`, `"subType":"04"`, `"n":1099511627776`} {
		if !strings.Contains(s, want) {
			t.Errorf("%s lacks %s", s, want)
		}
	}
}

func TestCheckReadOnly(t *testing.T) {
	tests := []struct {
		doc      string
		inFilter bool
		bad      string
	}{
		{`{"$out":"x"}`, false, "$out"},
		{`{"$lookup":{"from":"a","pipeline":[{"$merge":"b"}],"as":"c"}}`, false, "$merge"},
		{`{"$group":{"_id":null,"f":{"$accumulator":{}}}}`, false, "$accumulator"},
		{`{"$group":{"_id":null,"a":{"$push":"$x"},"b":{"$addToSet":"$y"},"c":{"$min":"$z"}}}`, false, ""},
		{`{"$set":{"a":1}}`, false, ""},
		{`{"$facet":{"a":[{"$sort":{"x":1}}]}}`, false, ""},
		{`{"a":{"$inc":1}}`, true, "$inc"},
		{`{"a":{"$gt":1},"b":{"$in":[1,2]}}`, true, ""},
		{`{"tags":{"$slice":2}}`, true, ""},
	}
	for _, tc := range tests {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(tc.doc), false, &d); err != nil {
			t.Fatal(err)
		}
		err := checkReadOnly(d, tc.inFilter)
		if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%s (filter %v): %v", tc.doc, tc.inFilter, err)
		}
	}
}
