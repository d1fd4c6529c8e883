package auditstore

// TEMPORARY (wt-seq): the types helper B defines in tlog.go; dropped at merge.

import (
	"context"
	"time"

	"github.com/google/uuid"
)

type LogKind uint8

const (
	LogAudit      LogKind = 0
	LogExecutions LogKind = 1
)

type LogLeaf struct {
	Index   int64
	EventID uuid.UUID
	Key     FeedKey
}

type StoredHash struct {
	Index int64
	Hash  [32]byte
}

type Checkpoint struct {
	Size  int64
	Root  [32]byte
	Time  time.Time
	KeyID string
	Note  []byte
}

var _ = context.Background
