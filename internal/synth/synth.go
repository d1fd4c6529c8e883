// Package synth makes synthetic, realistic audit events for demos, load and
// benchmarks.
package synth

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/schemas"
)

// Generator makes events of one organization spread over a few projects.
type Generator struct {
	Org      uuid.UUID
	Projects []uuid.UUID
	rng      *rand.Rand
}

// New returns a generator for org with n projects.
func New(org uuid.UUID, projects int, seed uint64) *Generator {
	g := &Generator{Org: org, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := 0; i < projects; i++ {
		g.Projects = append(g.Projects, uuid.New())
	}
	return g
}

var (
	people    = []string{"Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Edsger Dijkstra"}
	resources = []schemas.ResourceType{schemas.ResourceTypeProject, schemas.ResourceTypeAPIKey, schemas.ResourceTypeHook,
		schemas.ResourceTypeSecret, schemas.ResourceTypeUser, schemas.ResourceTypeProjectMember, schemas.ResourceTypeUserConnection}
	sources = []schemas.AuditSource{schemas.AuditSourceAPI, schemas.AuditSourceDashboard, schemas.AuditSourceCLI, schemas.AuditSourceSDK}
)

// Event returns an event at ts.
func (g *Generator) Event(ts time.Time) schemas.AuditEvent {
	r := g.rng
	who := r.IntN(len(people))
	rt := resources[r.IntN(len(resources))]
	action := schemas.AuditAction(1 + r.IntN(4))
	ev := schemas.AuditEvent{
		EventID:         uuid.New(),
		Timestamp:       time.UnixMilli(ts.UnixMilli()).UTC(),
		ClientIP:        schemas.Ptr(fmt.Sprintf("198.51.100.%d", 1+r.IntN(254))),
		Action:          action,
		Source:          sources[r.IntN(len(sources))],
		DisplayName:     people[who],
		OrganizationID:  g.Org,
		PrincipalID:     fmt.Sprintf("user_%d", who),
		UserID:          schemas.Ptr(fmt.Sprintf("user_%d", who)),
		PrincipalType:   "ACCOUNT",
		ResourceType:    &rt,
		ResourceID:      schemas.Ptr(fmt.Sprintf("%s_%d", rt.String()[len("RESOURCE_TYPE_"):], r.IntN(1000))),
		ResourceDisplay: schemas.Ptr(fmt.Sprintf("resource %d", r.IntN(1000))),
	}
	if len(g.Projects) > 0 && r.IntN(4) != 0 {
		ev.ProjectID = &g.Projects[r.IntN(len(g.Projects))]
	}
	data, _ := json.Marshal(map[string]any{
		"before": map[string]any{"enabled": action != schemas.AuditActionCreated},
		"after":  map[string]any{"enabled": action != schemas.AuditActionDisabled && action != schemas.AuditActionDeleted},
	})
	ev.Data = data
	return ev
}
