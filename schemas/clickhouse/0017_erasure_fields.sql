-- The fields of an erased entry of version 2 (internal/tlog/commit.go):
-- the JSON of its erasure member's "fields", each committed field opened by
-- its key or its commitment; '' for an entry of version 1 (no salt), which
-- is placed by its leaf hash only. See sqlite/0016.
ALTER TABLE entry_erasures ADD COLUMN fields String DEFAULT ''
