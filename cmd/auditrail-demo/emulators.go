package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/auditrail/auditrail/demo"
	"github.com/auditrail/auditrail/internal/emulators/google"
	"github.com/auditrail/auditrail/internal/emulators/graph"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/oauthflow"
)

// emulators are the provider emulators of the demo on one loopback
// listener: the OAuth authorization server under /oauth and the Google
// Docs/Drive/People emulator under /google (the api_base_url of the demo's
// google provider); the Microsoft Graph emulator joins under /microsoft.
type emulators struct {
	Base   string // http://127.0.0.1:<port>
	OAuth  *oauth.Server
	Google *google.Server
	Graph  *graph.Server
	// Samples are the IDs of the sample documents.
	Samples []string
	srv     *http.Server
	done    chan struct{}
}

// startEmulators listens on addr (the last start's, when free) and serves
// the emulators; their grants are kept in DATA/emulators so that a
// restart keeps the demo user's connections valid. clients are registered
// with redirect URI redirect.
func startEmulators(dataDir, addr, redirect string, clients map[string]demo.Client, log *slog.Logger) (*emulators, error) {
	cfg := oauth.DefaultConfig()
	for _, c := range clients {
		cfg.Clients = append(cfg.Clients, oauth.Client{ID: c.ID, Secret: c.Secret, RedirectURIs: []string{redirect}})
	}
	cfg.Users = []oauth.User{{ID: demo.User, Email: demo.UserEmail, Name: "Demo User"}}
	// The demo approves at once as the demo user; a real provider shows
	// its consent page (the emulator has one too, for the tests).
	cfg.AutoApprove = true
	cfg.StateFile = filepath.Join(dataDir, "emulators", "oauth.json")
	cfg.Logger = log
	if err := os.MkdirAll(filepath.Dir(cfg.StateFile), 0o700); err != nil {
		return nil, err
	}
	as, err := oauth.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("oauth emulator: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("provider emulators: %w", err)
	}
	gcfg := google.DefaultConfig()
	gcfg.Auth, gcfg.Logger, gcfg.Users = as, log, cfg.Users
	gs, err := google.New(gcfg)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("google emulator: %w", err)
	}
	// The sample documents, as if the demo's google client had made them
	// (its drive.file tokens see them). The emulator keeps documents in
	// memory: a restart seeds them afresh.
	samples, err := gs.SeedSample(demo.User, clients[oauthflow.TypeGoogle].ID)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("google emulator: %w", err)
	}
	// The Graph mail emulator with the demo user's sample mailbox (in
	// memory: a restart seeds it afresh).
	mcfg := graph.DefaultConfig()
	mcfg.Auth, mcfg.Logger, mcfg.Users = as, log, cfg.Users
	ms, err := graph.New(mcfg)
	if err == nil {
		err = ms.SeedSample(demo.User, demo.UserEmail)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("graph emulator: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oauth/", http.StripPrefix("/oauth", as.Handler()))
	mux.Handle("/google/", http.StripPrefix("/google", gs.Handler()))
	mux.Handle("/microsoft/", http.StripPrefix("/microsoft", ms.Handler()))
	e := &emulators{Base: "http://" + ln.Addr().String(), OAuth: as, Google: gs, Graph: ms, Samples: samples, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("provider emulators stopped", "err", err)
		}
	}()
	return e, nil
}

// Stop ends the listener.
func (e *emulators) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
	<-e.done
}
