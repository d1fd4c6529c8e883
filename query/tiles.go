package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/httpapi"
	itlog "github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// The tiles: each log of an organization served as a C2SP tlog-tiles log
// (https://c2sp.org/tlog-tiles) under GET …/<audit_logs|tool_executions>/tlog/,
// so that any tlog-tiles client (a monitor, a witness, filippo.io/torchwood)
// reads and verifies it without an API of ours:
//
//   - checkpoint: the latest checkpoint's signed note, byte for byte, with
//     the witnesses' cosignatures it carries;
//   - tile/<L>/<N>[.p/<W>]: the stored hashes of level 8·L at positions
//     N·256 … N·256+W−1, 32 bytes each, read in one store query;
//   - tile/entries/<N>[.p/<W>]: the leaves N·256 … N·256+W−1, each the
//     bytes its leaf hashes (apiitem.Preimage) after a big-endian uint16
//     length: the entries read from the feed between the feed positions of
//     the leaves around them.
//
// A tile is served once the log's size covers it (the head the proof
// routes cache, else one head read), never above: tiles and bundles of
// only version 2 leaves never change; a bundle holding a leaf of version
// 1 may become unservable (an erasure rewrites its entry), so it is cached
// for a short while only. Authorization is the list routes' (bearer,
// organization membership), every query parameter is refused.

// LeafReader reads a range of a log's leaves (the store's
// auditstore.LogStore.LeafRange): with it and the feeds, the entry bundles
// are served (503 without).
type LeafReader interface {
	LeafRange(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, error)
}

// Tiles' shape (C2SP tlog-tiles: height 8).
const (
	// TileWidth is the number of hashes (or entries) of a full tile.
	TileWidth = 1 << auditstore.TileHeight
	// MaxTileLevel is the highest level of a tile that a log of at most
	// 2^63−1 leaves has: its hashes, of level 8·7 = 56, are each over
	// 2^56 leaves.
	MaxTileLevel = 62 / auditstore.TileHeight
	// MaxBundleEntryBytes is the largest entry of an entry bundle (its
	// length is a uint16).
	MaxBundleEntryBytes = math.MaxUint16
)

// Cache-Control of the tiles' answers (private: they answer a bearer).
const (
	CacheCheckpoint = "private, max-age=5"
	CacheImmutable  = "private, max-age=31536000, immutable"
	// CacheBundleV1 is a bundle's that holds a leaf of version 1: an
	// erasure of its entry makes the bundle unservable (410).
	CacheBundleV1 = "private, max-age=60"
)

// Content types of the tiles' answers.
const (
	contentCheckpoint = "text/plain; charset=utf-8"
	contentTile       = "application/octet-stream"
)

// maxBundlePages bounds the feed pages that one bundle reads: its leaves'
// entries are a page; entries stored without a place in the log (rare:
// written after the sequencer passed their position), and a page that a
// store ends short (ClickHouse's reads of windows of the stream's
// sequences), add to it.
const maxBundlePages = 16

// registerTiles registers kind's tile routes under base
// (/api/v1/orgs/:org_id/<kind's path>).
func (s *Server) registerTiles(r fiber.Router, mw []fiber.Handler, base string, kind auditstore.LogKind) {
	r.Get(base+"/tlog/checkpoint", httpapi.With(mw, s.tileCheckpointRoute(kind))...)
	r.Get(base+"/tlog/tile/*", httpapi.With(mw, s.tileRoute(kind))...)
}

func (s *Server) tileCheckpointRoute(kind auditstore.LogKind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		org, err := s.logRequest(c, nil, func() error { return nil })
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
		defer cancel()
		cp, ok, err := s.logs.LatestCheckpoint(ctx, org, kind)
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if !ok {
			return fiber.NewError(fiber.StatusNotFound, "no checkpoint of this log yet")
		}
		s.proofs.setHead(org, kind, cp.Size)
		c.Set(fiber.HeaderContentType, contentCheckpoint)
		c.Set(fiber.HeaderCacheControl, CacheCheckpoint)
		return c.Send(cp.Note)
	}
}

func (s *Server) tileRoute(kind auditstore.LogKind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var t xtlog.Tile
		org, err := s.logRequest(c, nil, func() (err error) {
			t, err = ParseTilePath(c.Params("*"))
			return err
		})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
		defer cancel()
		if err := s.tileInLog(ctx, org, kind, t); err != nil {
			return err
		}
		var body []byte
		cache := CacheImmutable
		if t.L < 0 {
			var v1 bool
			if body, v1, err = s.bundle(ctx, org, kind, t); err != nil {
				return err
			}
			if v1 {
				cache = CacheBundleV1
			}
		} else if body, err = s.hashTile(ctx, org, kind, t); err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, contentTile)
		c.Set(fiber.HeaderCacheControl, cache)
		return c.Send(body)
	}
}

// TilePath is the path of t under the log's tlog/ prefix (C2SP
// tlog-tiles: tile/<L>/<N>[.p/<W>], tile/entries/<N>[.p/<W>]).
func TilePath(t xtlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", t.H))
	if t.L < 0 {
		return "tile/entries/" + strings.TrimPrefix(p, "data/")
	}
	return "tile/" + p
}

// ParseTilePath parses the path of a tile after "tile/" (C2SP
// tlog-tiles): "<L>/<N>[.p/<W>]", or "entries/<N>[.p/<W>]" for an entry
// bundle (L −1). L is a decimal of 0..MaxTileLevel without leading zeros;
// N is written in 3-digit groups, all but the last prefixed with x
// (1234067 is x001/x234/067), the first not x000; W is a decimal of 1..255
// without leading zeros (a full tile has no .p). The error (ErrBadParam)
// says what is wrong.
func ParseTilePath(p string) (xtlog.Tile, error) {
	bad := func(format string, args ...any) error {
		return badParam("tile path", "%q: %s", "tile/"+p, fmt.Sprintf(format, args...))
	}
	const want = "want tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>]"
	level, rest, ok := strings.Cut(p, "/")
	if !ok || rest == "" {
		return xtlog.Tile{}, bad(want)
	}
	t := xtlog.Tile{H: auditstore.TileHeight, L: -1, W: TileWidth}
	if level != "entries" {
		l, ok := decimal(level)
		if !ok {
			return xtlog.Tile{}, bad("the level %q is neither entries nor a decimal integer without leading zeros (%s)", level, want)
		}
		if l > MaxTileLevel {
			return xtlog.Tile{}, bad("level %d: a log of at most 2^63-1 leaves has tiles of levels 0 to %d only", l, MaxTileLevel)
		}
		t.L = int(l)
	}
	groups := strings.Split(rest, "/")
	if n := len(groups); n >= 2 && strings.HasSuffix(groups[n-2], ".p") {
		w, ok := decimal(groups[n-1])
		switch {
		case !ok:
			return xtlog.Tile{}, bad("the width %q is not a decimal integer without leading zeros", groups[n-1])
		case w == TileWidth:
			return xtlog.Tile{}, bad("a full tile is written without .p/%d", TileWidth)
		case w < 1 || w > TileWidth-1:
			return xtlog.Tile{}, bad("the width %d of a partial tile is not in 1..%d", w, TileWidth-1)
		}
		t.W = int(w)
		groups[n-2] = strings.TrimSuffix(groups[n-2], ".p")
		groups = groups[:n-1]
	} else if strings.HasSuffix(groups[n-1], ".p") {
		return xtlog.Tile{}, bad("a partial tile's width is missing after .p (.p/<W>)")
	}
	for i, g := range groups {
		digits, x := strings.CutPrefix(g, "x")
		if x != (i < len(groups)-1) || len(digits) != 3 || strings.Trim(digits, "0123456789") != "" {
			return xtlog.Tile{}, bad("the index must be 3-digit groups, all but the last prefixed with x (1234067 is x001/x234/067)")
		}
		if i == 0 && x && digits == "000" {
			return xtlog.Tile{}, bad("the index starts with the group x000 (write it without)")
		}
		d, _ := strconv.ParseInt(digits, 10, 64)
		if t.N > (math.MaxInt64-d)/1000 {
			return xtlog.Tile{}, bad("the index is beyond 2^63-1")
		}
		t.N = t.N*1000 + d
	}
	return t, nil
}

// decimal parses a non-negative decimal integer written without leading
// zeros (at most 18 digits).
func decimal(s string) (int64, bool) {
	if s == "" || len(s) > 18 || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// tileLeaves is the size a log must have for every hash (or entry) of t:
// (N·256 + W) << 8·L leaves; false when no log of at most 2^63−1 leaves
// has it.
func tileLeaves(t xtlog.Tile) (int64, bool) {
	shift := 0
	if t.L > 0 {
		shift = t.L * auditstore.TileHeight
	}
	limit := int64(math.MaxInt64) >> shift
	if t.N > (limit-int64(t.W))/TileWidth {
		return 0, false
	}
	return (t.N*TileWidth + int64(t.W)) << shift, true
}

// tileInLog answers 404 unless the log's size covers every hash (or
// entry) of t: a size seen before needs no store read.
func (s *Server) tileInLog(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, t xtlog.Tile) error {
	need, ok := tileLeaves(t)
	if ok && need <= s.proofs.head(org, kind) {
		return nil
	}
	head, _, err := s.logs.LogHead(ctx, org, kind)
	if err != nil {
		return fmt.Errorf("log head: %w", err)
	}
	s.proofs.setHead(org, kind, head)
	if !ok || need > head {
		what := "its hashes"
		if t.L < 0 {
			what = "its entries"
		}
		return fiber.NewError(fiber.StatusNotFound, fmt.Sprintf("%s is not in the log (yet): %s need a log of %s leaves, it has %d",
			TilePath(t), what, leavesText(need, ok), head))
	}
	return nil
}

func leavesText(n int64, ok bool) string {
	if !ok {
		return "more than 2^63-1"
	}
	return strconv.FormatInt(n, 10)
}

// hashTile reads hash tile t (covered by the log's size) in one store
// query: its W hashes of level 8·L, concatenated.
func (s *Server) hashTile(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, t xtlog.Tile) ([]byte, error) {
	idx := make([]int64, t.W)
	for i := range idx {
		idx[i] = xtlog.StoredHashIndex(t.L*auditstore.TileHeight, t.N*TileWidth+int64(i))
	}
	hs, err := s.logs.ReadLogHashes(ctx, org, kind, idx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TilePath(t), err)
	}
	if len(hs) != len(idx) {
		return nil, fmt.Errorf("%s: %d hashes for %d indexes", TilePath(t), len(hs), len(idx))
	}
	body := make([]byte, 0, len(hs)*len(hs[0]))
	for _, h := range hs {
		body = append(body, h[:]...)
	}
	return body, nil
}

// bundle builds entry bundle t (covered by the log's size): the leaves'
// range (and the one before, whose feed position starts the read), their
// leaf hashes (one query), their entries from the feed, the erasures of
// those, then each entry's preimage, which must hash to its leaf. v1
// tells that it holds a leaf of version 1. The first leaf that cannot be
// served makes the whole bundle fail: expired (410), erased with a leaf
// of version 1 (410), over MaxBundleEntryBytes (422), missing from the
// store, or not hashing to its leaf (500).
func (s *Server) bundle(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, t xtlog.Tile) (body []byte, v1 bool, err error) {
	lr, ok := s.logs.(LeafReader)
	feeds, fok := s.store.(FeedReader)
	if !ok || !fok {
		return nil, false, fiber.NewError(fiber.StatusServiceUnavailable, "entry bundles are not available on this server")
	}
	lo, hi := t.N*TileWidth, t.N*TileWidth+int64(t.W)
	first := max(lo-1, 0)
	leaves, err := lr.LeafRange(ctx, org, kind, first, hi)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", TilePath(t), err)
	}
	var after auditstore.FeedKey // the feed's start for leaf 0
	if lo > 0 {
		after, leaves = leaves[0].Key, leaves[1:]
	}
	idx := make([]int64, len(leaves))
	for i := range leaves {
		idx[i] = xtlog.StoredHashIndex(0, lo+int64(i))
	}
	hashes, err := s.logs.ReadLogHashes(ctx, org, kind, idx)
	if err != nil {
		return nil, false, fmt.Errorf("%s: leaf hashes: %w", TilePath(t), err)
	}
	items, err := bundleItems(ctx, feeds, org, kind, after, leaves)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", TilePath(t), err)
	}
	ids := make([]uuid.UUID, 0, len(items))
	for id := range items {
		ids = append(ids, id)
	}
	erased, err := s.erasedOf(ctx, org, kind, ids)
	if err != nil {
		return nil, false, err
	}
	for i, l := range leaves {
		index := lo + int64(i)
		it, ok := items[l.EventID]
		if !ok {
			return nil, false, s.missingEntry(ctx, org, kind, t, index, l.EventID)
		}
		er := erased[l.EventID]
		if er != nil && len(er.Fields) == 0 {
			return nil, false, fiber.NewError(fiber.StatusGone, fmt.Sprintf(
				"%s cannot be served: leaf %d (event %s) was erased by erasure %s, and its leaf is of version 1: the entry no longer has the bytes its leaf hashes (its hash is still in tile/0, its entry in the list routes)",
				TilePath(t), index, l.EventID, er.ID))
		}
		e, err := apiitem.Preimage(it.withErasure(er))
		if errors.Is(err, itlog.ErrTooLarge) || err == nil && len(e.Canonical) > MaxBundleEntryBytes {
			return nil, false, fiber.NewError(fiber.StatusUnprocessableEntity, fmt.Sprintf(
				"%s cannot be served: the entry of leaf %d (event %s) is over the %d bytes of an entry of a C2SP entry bundle (read it from the list routes or an export, and its proof from …/proof)",
				TilePath(t), index, l.EventID, MaxBundleEntryBytes))
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: leaf %d (event %s): %w", TilePath(t), index, l.EventID, err)
		}
		if e.Leaf != hashes[i] {
			return nil, false, fmt.Errorf("%s: leaf %d (event %s): the stored entry does not hash to the leaf the log holds", TilePath(t), index, l.EventID)
		}
		v1 = v1 || e.Version == 1
		body = append(body, byte(len(e.Canonical)>>8), byte(len(e.Canonical)))
		body = append(body, e.Canonical...)
	}
	return body, v1, nil
}

// bundleItem is an entry of a bundle as the routes serve it (apiitem.Item
// or apiitem.ExecutionItem).
type bundleItem struct {
	audit *apiitem.Item
	exec  *apiitem.ExecutionItem
}

// withErasure is the item served with its erasure (nil: none).
func (b bundleItem) withErasure(er *apiitem.Erasure) any {
	if b.audit != nil {
		it := *b.audit
		it.Erasure = er
		return it
	}
	it := *b.exec
	it.Erasure = er
	return it
}

// bundleItems reads the entries of leaves (in log order, each after the
// one before) from the feed: the entries after the feed position after
// (the leaf before the first's; zero for leaf 0) up to the last leaf's,
// by event id. An entry absent from the answer is not stored (any more).
func bundleItems(ctx context.Context, feeds FeedReader, org uuid.UUID, kind auditstore.LogKind, after auditstore.FeedKey, leaves []auditstore.LogLeaf) (map[uuid.UUID]bundleItem, error) {
	out := make(map[uuid.UUID]bundleItem, len(leaves))
	if len(leaves) == 0 {
		return out, nil
	}
	want := make(map[uuid.UUID]bool, len(leaves))
	for _, l := range leaves {
		want[l.EventID] = true
	}
	last := leaves[len(leaves)-1].Key
	limit := min(len(leaves), auditstore.FeedMaxLimit)
	for range maxBundlePages {
		var next auditstore.FeedKey
		var more bool
		if kind == auditstore.LogAudit {
			p, err := feeds.FeedAudit(ctx, auditstore.FeedQuery{OrgID: org, After: after, Upto: last.Seq, Limit: limit})
			if err != nil {
				return nil, fmt.Errorf("feed: %w", err)
			}
			for i := range p.Items {
				if e := &p.Items[i]; want[e.EventID] {
					it := apiitem.NewItem(e)
					out[e.EventID] = bundleItem{audit: &it}
				}
			}
			next, more = p.Next, p.HasMore
		} else {
			p, err := feeds.FeedExecutions(ctx, auditstore.ExecFeedQuery{OrgID: org, After: after, Upto: last.Seq, Limit: limit})
			if err != nil {
				return nil, fmt.Errorf("feed: %w", err)
			}
			for i := range p.Items {
				id, err := uuid.Parse(p.Items[i].EventID)
				if err == nil && want[id] {
					it := apiitem.NewExecutionItem(&p.Items[i])
					out[id] = bundleItem{exec: &it}
				}
			}
			next, more = p.Next, p.HasMore
		}
		// Done: every entry found, the feed exhausted up to the last
		// leaf's position or stuck.
		if len(out) == len(want) || !more || !next.Less(last) || next == after {
			break
		}
		after = next
	}
	return out, nil
}

// missingEntry is the error of a bundle whose leaf index (event id) has
// no entry in the store: 410 when it expired under the organization's
// retention (below the horizon of the log's latest expiry), else an
// internal error (an entry deleted behind the log's back).
func (s *Server) missingEntry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, t xtlog.Tile, index int64, id uuid.UUID) error {
	if s.expiries != nil {
		exp, ok, err := s.expiries.LatestExpiry(ctx, org, kind)
		if err != nil {
			return fmt.Errorf("latest expiry: %w", err)
		}
		if ok && index < exp.BelowLeaf {
			return fiber.NewError(fiber.StatusGone, fmt.Sprintf(
				"%s cannot be served: leaf %d (event %s) expired under the organization's retention of %s (expiry recorded by event %s); its hash is still in tile/0",
				TilePath(t), index, id, cpstate.FormatRetention(exp.Retention), exp.Record))
		}
	}
	return fmt.Errorf("%s: leaf %d (event %s) is in the log, but its entry is not in the store", TilePath(t), index, id)
}
