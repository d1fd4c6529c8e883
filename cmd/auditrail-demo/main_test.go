package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/auditrail/auditrail/demo"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The servers answer with where they listen once both serve (the sample
// database seeded, the emulators up), listen again where asked when that
// is free, and stop when their input closes; a configuration without a
// redirect is refused.
func TestServersAnswerAndStop(t *testing.T) {
	data := t.TempDir()
	start := func(cfg demo.ServersConfig) (demo.Answer, io.WriteCloser, chan error) {
		t.Helper()
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- run(context.Background(), inR, outW, slog.New(slog.DiscardHandler)) }()
		b, _ := json.Marshal(cfg)
		go func() { _, _ = inW.Write(append(b, '\n')) }()
		line, err := bufio.NewReader(outR).ReadBytes('\n')
		if err != nil {
			t.Fatalf("no answer: %v (%v)", err, <-done)
		}
		var s demo.Answer
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatal(err)
		}
		return s, inW, done
	}
	cfg := demo.ServersConfig{Data: data, Redirect: "http://127.0.0.1:1/api/v1/oauth/callback",
		Clients: map[string]demo.Client{"google": {ID: "g", Secret: "s"}, "microsoft": {ID: "m", Secret: "s"}}}
	s, in, done := start(cfg)
	if s.Samples < 1 {
		t.Errorf("no sample documents: %+v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(ctx, options.Client().ApplyURI(s.MongoURI))
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Database("shop").Collection("orders").CountDocuments(ctx, bson.M{"status": "paid"})
	_ = c.Disconnect(ctx)
	if err != nil || n != 48 {
		t.Fatalf("sample orders paid = %d, %v", n, err)
	}
	// The emulators serve: userinfo without a token is the OAuth server's 401.
	resp, err := http.Get(s.Emulators + "/oauth/userinfo")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /oauth/userinfo without a token: %d", resp.StatusCode)
	}
	in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the servers did not stop when their input closed")
	}
	// A restart listens where the last start did.
	cfg.Mongo, cfg.Emulators = hostOf(t, s.MongoURI), hostOf(t, s.Emulators)
	s2, in2, done2 := start(cfg)
	if s2.MongoURI != s.MongoURI || s2.Emulators != s.Emulators {
		t.Errorf("a restart moved: %+v, then %+v", s, s2)
	}
	in2.Close()
	<-done2

	if err := run(context.Background(), stringsReader(`{"data":"x"}`+"\n"), io.Discard, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a configuration without redirect was accepted")
	}
}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
