package query

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	xtlog "golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sync/errgroup"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// LogReader reads the tamper-evidence logs (auditstore.LogStore): a store
// that has them gets the checkpoint, proof and consistency routes and
// leaf_index on every listed and exported entry.
type LogReader interface {
	LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error)
	ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error)
	LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error)
	LeafTile(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (int64, []auditstore.StoredHash, bool, error)
	LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error)
	CheckpointAt(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size int64) (auditstore.Checkpoint, bool, error)
}

// KeySource lists the public keys that sign checkpoints (the keyring).
type KeySource interface {
	PublicKeys(ctx context.Context) ([]tlog.PublicKey, error)
}

// ServeAuditKeysWith enables GET /api/v1/audit_keys (503 without it).
// Call it before serving.
func (s *Server) ServeAuditKeysWith(k KeySource) { s.keys = k }

// Query parameters of the log routes.
var (
	CheckpointParams  = []string{"size"}
	ProofParams       = []string{"event_id", "size"}
	ConsistencyParams = []string{"from", "to"}
)

// CheckpointData is the checkpoint route's data.
type CheckpointData struct {
	Note      string `json:"note"`
	Origin    string `json:"origin"`
	Size      int64  `json:"size"`
	RootHash  string `json:"root_hash"`
	Timestamp string `json:"timestamp"`
	KeyID     string `json:"key_id"`
	// SealedUntil is the note's sealed_until line (nil: none).
	SealedUntil *string `json:"sealed_until"`
}

// ProofData is the inclusion proof route's data.
type ProofData struct {
	LeafIndex int64    `json:"leaf_index"`
	LeafHash  string   `json:"leaf_hash"`
	Size      int64    `json:"size"`
	Hashes    []string `json:"hashes"`
}

// ConsistencyData is the consistency route's data.
type ConsistencyData struct {
	From   int64    `json:"from"`
	To     int64    `json:"to"`
	Hashes []string `json:"hashes"`
}

func (s *Server) registerLogs(r fiber.Router, mw []fiber.Handler) {
	r.Get("/api/v1/audit_keys", httpapi.With(mw, s.auditKeys)...)
	if s.logs == nil {
		return
	}
	for _, k := range []struct {
		path string
		kind auditstore.LogKind
	}{{"audit_logs", auditstore.LogAudit}, {"tool_executions", auditstore.LogExecutions}} {
		base := "/api/v1/orgs/:org_id/" + k.path
		r.Get(base+"/checkpoint", httpapi.With(mw, s.checkpointRoute(k.kind))...)
		r.Get(base+"/proof", httpapi.With(mw, s.proofRoute(k.kind))...)
		r.Get(base+"/consistency", httpapi.With(mw, s.consistencyRoute(k.kind))...)
		s.registerTiles(r, mw, base, k.kind)
	}
}

func (s *Server) auditKeys(c *fiber.Ctx) error {
	if _, err := s.authenticate(c); err != nil {
		return err
	}
	if err := httpapi.CheckParams(c.Context().QueryArgs().VisitAll, nil); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, err.Error())
	}
	if s.keys == nil {
		return fiber.NewError(fiber.StatusServiceUnavailable, "the audit keys are not available on this server")
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
	defer cancel()
	keys, err := s.keys.PublicKeys(ctx)
	if err != nil {
		return fmt.Errorf("audit keys: %w", err)
	}
	if keys == nil {
		keys = []tlog.PublicKey{}
	}
	return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: keys})
}

// parseCount parses a non-negative integer parameter; "" is absent (-1).
func parseCount(name, v string) (int64, error) {
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badParam(name, "%q is not a non-negative integer", v)
	}
	return n, nil
}

// logRequest parses org_id and checks the parameters against allowed,
// then authorizes the caller as the org's list route does.
func (s *Server) logRequest(c *fiber.Ctx, allowed []string, parse func() error) (uuid.UUID, error) {
	org, perr := parseUUID("org_id", c.Params("org_id"))
	if perr == nil {
		perr = httpapi.CheckParams(c.Context().QueryArgs().VisitAll, allowed)
	}
	if perr == nil {
		perr = parse()
	}
	return org, s.authorizeList(c, org, nil, perr)
}

func (s *Server) checkpointRoute(kind auditstore.LogKind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var size int64
		org, err := s.logRequest(c, CheckpointParams, func() (err error) {
			size, err = parseCount("size", c.Query("size"))
			return err
		})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
		defer cancel()
		var cp auditstore.Checkpoint
		var ok bool
		if size < 0 {
			cp, ok, err = s.logs.LatestCheckpoint(ctx, org, kind)
		} else {
			cp, ok, err = s.logs.CheckpointAt(ctx, org, kind, size)
		}
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if !ok {
			if size < 0 {
				return fiber.NewError(fiber.StatusNotFound, "no checkpoint of this log yet")
			}
			return fiber.NewError(fiber.StatusNotFound, fmt.Sprintf("no checkpoint of size %d", size))
		}
		return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: checkpointData(cp)})
	}
}

func checkpointData(cp auditstore.Checkpoint) CheckpointData {
	origin, _, _ := bytes.Cut(cp.Note, []byte("\n"))
	d := CheckpointData{Note: string(cp.Note), Origin: string(origin), Size: cp.Size,
		RootHash: base64.StdEncoding.EncodeToString(cp.Root[:]), Timestamp: cp.Time.UTC().Format(tlog.TimeFormat), KeyID: cp.KeyID}
	if text, _, ok := bytes.Cut(cp.Note, []byte("\n\n")); ok {
		for _, l := range bytes.Split(text, []byte("\n")) {
			if v, ok := bytes.CutPrefix(l, []byte(tlog.SealedExtension)); ok {
				s := string(v)
				d.SealedUntil = &s
			}
		}
	}
	return d
}

// treeSize resolves the size a proof is asked against: the latest
// checkpoint's when not given (404 without one), else checked against the
// log's size (400 beyond it). A size seen before needs no store read.
func (s *Server) treeSize(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, name string, size int64) (int64, error) {
	if size < 0 {
		cp, ok, err := s.logs.LatestCheckpoint(ctx, org, kind)
		if err != nil {
			return 0, fmt.Errorf("checkpoint: %w", err)
		}
		if !ok {
			return 0, fiber.NewError(fiber.StatusNotFound, "no checkpoint of this log yet: give size")
		}
		s.proofs.setHead(org, kind, cp.Size)
		return cp.Size, nil
	}
	if size <= s.proofs.head(org, kind) {
		return size, nil
	}
	head, _, err := s.logs.LogHead(ctx, org, kind)
	if err != nil {
		return 0, fmt.Errorf("log head: %w", err)
	}
	s.proofs.setHead(org, kind, head)
	if size > head {
		return 0, fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("%s: %d is beyond the log's size %d", name, size, head))
	}
	return size, nil
}

// cachedReader reads (org, kind)'s stored hashes through the cache, then
// tile (the hashes LeafTile read, if any), then the store; the first read
// also fetches extra (in the same store query) into got. A store read
// also fetches the uncached hashes of the upper tiles (levels of
// auditstore.TileHeight and more) of the hashes it misses, so that the
// upper levels of a large tree, which every proof asks for, are soon all
// cached and a proof reads its leaf's tile only.
type cachedReader struct {
	s     *Server
	ctx   context.Context
	org   uuid.UUID
	kind  auditstore.LogKind
	size  int64 // the tree's size
	limit int64 // tlog.StoredHashCount(size): cached below it
	tile  map[int64][32]byte
	extra []int64
	got   [][32]byte
}

func newCachedReader(ctx context.Context, s *Server, org uuid.UUID, kind auditstore.LogKind, size int64) *cachedReader {
	return &cachedReader{s: s, ctx: ctx, org: org, kind: kind, size: size, limit: xtlog.StoredHashCount(size)}
}

func (r *cachedReader) ReadHashes(indexes []int64) ([]xtlog.Hash, error) {
	all := append(append([]int64(nil), indexes...), r.extra...)
	r.extra = nil
	hs := make([][32]byte, len(all))
	found := make([]bool, len(all))
	r.s.proofs.hashes(r.org, r.kind, all, hs, found)
	var miss []int64
	for i, ok := range found {
		if ok {
			continue
		}
		if h, ok := r.tile[all[i]]; ok && all[i] < r.limit {
			hs[i], found[i] = h, true
			r.s.proofs.addHash(r.org, r.kind, all[i], h)
			continue
		}
		miss = append(miss, all[i])
	}
	if len(miss) > 0 {
		fetch := r.withUpperTiles(miss)
		got, err := r.s.logs.ReadLogHashes(r.ctx, r.org, r.kind, fetch)
		if err != nil {
			return nil, err
		}
		if len(got) != len(fetch) {
			return nil, fmt.Errorf("read log hashes: %d hashes for %d indexes", len(got), len(fetch))
		}
		read := make(map[int64][32]byte, len(fetch))
		for j, x := range fetch {
			read[x] = got[j]
			if x < r.limit {
				r.s.proofs.addHash(r.org, r.kind, x, got[j])
			}
		}
		for i, ok := range found {
			if !ok {
				hs[i] = read[all[i]]
			}
		}
	}
	r.got = hs[len(indexes):]
	out := make([]xtlog.Hash, len(indexes))
	for i := range indexes {
		out[i] = hs[i]
	}
	return out, nil
}

// withUpperTiles returns miss (its distinct indexes) and, for each of
// them of a level of auditstore.TileHeight or more, the hashes of its
// tile complete in the tree of r.size that the cache does not hold.
// Without room for a few dozen tiles in the cache (none, or a tiny one)
// the tiles would be evicted before they serve: only miss is read.
func (r *cachedReader) withUpperTiles(miss []int64) []int64 {
	seen := make(map[int64]bool, len(miss))
	var out, extra []int64
	for _, x := range miss {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	if r.s.proofs.max < minTileCacheBytes {
		return out
	}
	for _, x := range out {
		if level, _ := xtlog.SplitStoredHashIndex(x); level < auditstore.TileHeight || x >= r.limit {
			continue
		}
		for _, y := range upperTile(x, r.size) {
			if !seen[y] {
				seen[y] = true
				extra = append(extra, y)
			}
		}
	}
	if len(extra) == 0 {
		return out
	}
	hs := make([][32]byte, len(extra))
	cached := make([]bool, len(extra))
	r.s.proofs.hashes(r.org, r.kind, extra, hs, cached)
	for i, y := range extra {
		if !cached[i] {
			out = append(out, y)
		}
	}
	return out
}

// minTileCacheBytes is the smallest proof cache that fetches whole upper
// tiles: room for 32 tiles of 510 hashes (2.9 MB).
const minTileCacheBytes = 32 * 510 * cacheEntryBytes

// upperTile returns the stored hash indexes of the tile that holds stored
// hash x (of level auditstore.TileHeight or more) whose nodes are complete
// in the tree of size leaves: for a tile of level L, the nodes of levels
// 8L to 8L+7 above 2^8 nodes of level 8L, at most 510 hashes.
func upperTile(x, size int64) []int64 {
	const h = auditstore.TileHeight
	level, n := xtlog.SplitStoredHashIndex(x)
	base := level / h * h
	k := n << (level - base) >> h // the tile's number at its level
	var out []int64
	for l := base; l < base+h; l++ {
		lo, hi := k<<h>>(l-base), (k+1)<<h>>(l-base)
		for m := lo; m < hi && (m+1)<<l <= size; m++ {
			out = append(out, xtlog.StoredHashIndex(l, m))
		}
	}
	return out
}

func b64s(hs []xtlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

func (s *Server) proofRoute(kind auditstore.LogKind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var size int64
		var event uuid.UUID
		org, err := s.logRequest(c, ProofParams, func() (err error) {
			if c.Query("event_id") == "" {
				return badParam("event_id", "required")
			}
			if event, err = parseUUID("event_id", c.Query("event_id")); err != nil {
				return err
			}
			size, err = parseCount("size", c.Query("size"))
			return err
		})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
		defer cancel()
		latest := s.latestExpiry(ctx, org, kind)
		p, err := s.proof(ctx, org, kind, event, size)
		if err != nil {
			_, _, _ = latest() // its read ends before the context
			return err
		}
		if err := s.expiredProof(ctx, org, kind, event, p.LeafIndex, latest); err != nil {
			return err
		}
		return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: p})
	}
}

// proof is the inclusion proof of event in the tree of size (< 0: the
// latest checkpoint's) of (org, kind)'s log. An event whose leaf index is
// not cached is read with its tile in one store query (tileProof); when
// that does not find the event below the size (or the size is beyond the
// log), the leaf index is read, then the size checked, as the answer says.
func (s *Server) proof(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (ProofData, error) {
	index, ok := s.proofs.leaf(org, kind, event)
	if !ok {
		p, ok, err := s.tileProof(ctx, org, kind, event, size)
		if err != nil || ok {
			return p, err
		}
		m, err := s.logs.LeafIndexes(ctx, org, kind, []uuid.UUID{event})
		if err != nil {
			return ProofData{}, fmt.Errorf("leaf index: %w", err)
		}
		if index, ok = m[event]; !ok {
			return ProofData{}, fiber.NewError(fiber.StatusNotFound, "event "+event.String()+" is not in the log (yet)")
		}
		s.proofs.addLeaf(org, kind, event, index)
	}
	size, err := s.treeSize(ctx, org, kind, "size", size)
	if err != nil {
		return ProofData{}, err
	}
	if index >= size {
		return ProofData{}, fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("size: the event is leaf %d, not in the tree of %d leaves", index, size))
	}
	return s.proveLeaf(ctx, org, kind, index, size, nil)
}

// tileProof is the proof of event from one LeafTile query (the leaf index
// and its tile; the cache holds the rest once warm), once the tree's size
// is known to be reached: the latest checkpoint's, one at or below a size
// the log was seen to reach (no read), else after a head read. ok is
// false, with nothing read but the size, when the size is beyond the log
// or the log holds no leaf of the event below it: the caller answers then
// (a 404 or 400, as without tileProof).
func (s *Server) tileProof(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (ProofData, bool, error) {
	if size < 0 {
		cp, ok, err := s.logs.LatestCheckpoint(ctx, org, kind)
		if err != nil {
			return ProofData{}, false, fmt.Errorf("checkpoint: %w", err)
		}
		if !ok {
			return ProofData{}, false, nil
		}
		s.proofs.setHead(org, kind, cp.Size)
		size = cp.Size
	} else if size > s.proofs.head(org, kind) {
		head, _, err := s.logs.LogHead(ctx, org, kind)
		if err != nil {
			return ProofData{}, false, fmt.Errorf("log head: %w", err)
		}
		s.proofs.setHead(org, kind, head)
		if size > head {
			return ProofData{}, false, nil
		}
	}
	index, tile, ok, err := s.logs.LeafTile(ctx, org, kind, event, size)
	if err != nil {
		return ProofData{}, false, fmt.Errorf("leaf tile: %w", err)
	}
	if !ok {
		return ProofData{}, false, nil
	}
	s.proofs.addLeaf(org, kind, event, index)
	hashes := make(map[int64][32]byte, len(tile))
	for _, h := range tile {
		hashes[h.Index] = h.Hash
	}
	p, err := s.proveLeaf(ctx, org, kind, index, size, hashes)
	return p, err == nil, err
}

// proveLeaf proves leaf index in the tree of size (index < size, size
// reached by the log) from tile (may be nil), the cache and the store.
func (s *Server) proveLeaf(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, index, size int64, tile map[int64][32]byte) (ProofData, error) {
	r := newCachedReader(ctx, s, org, kind, size)
	r.tile, r.extra = tile, []int64{xtlog.StoredHashIndex(0, index)}
	hs, err := xtlog.ProveRecord(size, index, r)
	if err != nil {
		return ProofData{}, fmt.Errorf("inclusion proof: %w", err)
	}
	if r.extra != nil { // a tree of one leaf: the proof read nothing
		if _, err := r.ReadHashes(nil); err != nil {
			return ProofData{}, fmt.Errorf("leaf hash: %w", err)
		}
	}
	if len(r.got) == 0 {
		return ProofData{}, errors.New("inclusion proof: the leaf hash was not read")
	}
	leaf := r.got[0]
	return ProofData{LeafIndex: index, LeafHash: base64.StdEncoding.EncodeToString(leaf[:]), Size: size, Hashes: b64s(hs)}, nil
}

func (s *Server) consistencyRoute(kind auditstore.LogKind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var from, to int64
		org, err := s.logRequest(c, ConsistencyParams, func() (err error) {
			for _, p := range []struct {
				name string
				v    *int64
			}{{"from", &from}, {"to", &to}} {
				if c.Query(p.name) == "" {
					return badParam(p.name, "required")
				}
				if *p.v, err = parseCount(p.name, c.Query(p.name)); err != nil {
					return err
				}
			}
			if from > to {
				return badParam("from", "%d is larger than to %d", from, to)
			}
			return nil
		})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
		defer cancel()
		if _, err := s.treeSize(ctx, org, kind, "to", to); err != nil {
			return err
		}
		var hs []xtlog.Hash
		if from > 0 && from < to {
			if hs, err = xtlog.ProveTree(to, from, newCachedReader(ctx, s, org, kind, to)); err != nil {
				return fmt.Errorf("consistency proof: %w", err)
			}
		}
		return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: ConsistencyData{From: from, To: to, Hashes: b64s(hs)}})
	}
}

// leafIndexes returns the leaf indexes of events in (org, kind)'s log (one
// store query; nil without a log store).
func (s *Server) leafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, events []uuid.UUID) (map[uuid.UUID]int64, error) {
	if s.logs == nil || len(events) == 0 {
		return nil, nil
	}
	m, err := s.logs.LeafIndexes(ctx, org, kind, events)
	if err != nil {
		return nil, fmt.Errorf("leaf indexes: %w", err)
	}
	return m, nil
}

// listedLeafIndexes is leafIndexes for a list page (at most MaxLimit
// entries, those a reader is about to ask proofs of: the dashboard
// verifies each entry it shows): the answers also go to the proof cache,
// so that the proof of a listed entry skips the leaf index query.
func (s *Server) listedLeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, events []uuid.UUID) (map[uuid.UUID]int64, error) {
	m, err := s.leafIndexes(ctx, org, kind, events)
	for id, x := range m {
		s.proofs.addLeaf(org, kind, id, x)
	}
	return m, err
}

// latestNote is the latest checkpoint's signed note of (org, kind)'s log
// (nil: none, or no log store).
func (s *Server) latestNote(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) ([]byte, int64, error) {
	if s.logs == nil {
		return nil, 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	cp, ok, err := s.logs.LatestCheckpoint(ctx, org, kind)
	if err != nil || !ok {
		return nil, 0, err
	}
	return cp.Note, cp.Size, nil
}

// entryMarks is what a page's entries carry beside their stored fields:
// their leaf indexes in the organization's log and, for those erased,
// their erasures.
type entryMarks struct {
	leaves map[uuid.UUID]int64
	erased map[uuid.UUID]*apiitem.Erasure
}

// marksOf reads the marks of a page's events: its leaf indexes (listed: a
// list page's, which also go to the proof cache, listedLeafIndexes) and
// its erasures, the two store queries side by side, so that a page waits
// for the slower of them rather than for both in turn.
func (s *Server) marksOf(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, events []uuid.UUID, listed bool) (entryMarks, error) {
	var m entryMarks
	if len(events) == 0 {
		return m, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if listed {
			m.leaves, err = s.listedLeafIndexes(gctx, org, kind, events)
		} else {
			m.leaves, err = s.leafIndexes(gctx, org, kind, events)
		}
		return err
	})
	g.Go(func() (err error) {
		m.erased, err = s.erasedOf(gctx, org, kind, events)
		return err
	})
	return m, g.Wait()
}
