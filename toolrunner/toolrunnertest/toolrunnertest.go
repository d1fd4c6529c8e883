// Package toolrunnertest holds what toolkit tests give the tool runner in
// place of the control plane: the users' connections to one provider,
// holding real tokens of the OAuth emulator.
package toolrunnertest

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/auditrail/auditrail/internal/oauthflow"
)

// Connections is a toolrunner.ConnectionSource of the users' connections
// to Provider; it is safe for concurrent use.
type Connections struct {
	Provider string
	mu       sync.Mutex
	conns    map[string]oauthflow.Connection // by user
}

// NewConnections answers a source with no connection yet.
func NewConnections(provider string) *Connections {
	return &Connections{Provider: provider, conns: map[string]oauthflow.Connection{}}
}

// Set stores the user's connection.
func (c *Connections) Set(user string, cn oauthflow.Connection) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns[user] = cn
}

// Get answers the user's connection.
func (c *Connections) Get(user string) (oauthflow.Connection, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cn, ok := c.conns[user]
	return cn, ok
}

// Update changes the user's connection in place.
func (c *Connections) Update(user string, f func(*oauthflow.Connection)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cn := c.conns[user]
	f(&cn)
	c.conns[user] = cn
}

// Delete disconnects the user.
func (c *Connections) Delete(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, user)
}

// Connection is toolrunner.ConnectionSource's.
func (c *Connections) Connection(_ context.Context, _, _, user, provider string) (oauthflow.Connection, error) {
	cn, ok := c.Get(user)
	if !ok || provider != c.Provider {
		return oauthflow.Connection{}, oauthflow.ErrNotConnected
	}
	return cn, nil
}

// ConnectionStatus is toolrunner.ConnectionSource's.
func (c *Connections) ConnectionStatus(_, _, user, provider string) (bool, []string) {
	cn, ok := c.Get(user)
	return ok && provider == c.Provider, cn.Scopes
}

// AuthorizationURL is toolrunner.ConnectionSource's: a URL naming the user
// and the scopes, valid 10 minutes.
func (c *Connections) AuthorizationURL(_ context.Context, _, _, user, _ string, scopes []string) (string, time.Time, error) {
	return "https://provider.example/authorize?user=" + url.QueryEscape(user) + "&scope=" + url.QueryEscape(strings.Join(scopes, " ")),
		time.Now().Add(10 * time.Minute), nil
}
