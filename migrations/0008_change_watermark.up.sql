-- On one PostgreSQL a change row no longer has a pending row (0007) beside
-- it: a write inserts its change row alone, with its transaction's tag and
-- whether it is the transaction's last change (last), and the sequencer
-- finds the committed rows it has not numbered by their ids. Ids come from
-- one sequence, taken after the writing transaction has its transaction
-- id; the sequencer remembers the highest id it has looked at (scanned)
-- and the lower ids that it did not see (gaps: rows of transactions in
-- progress or rolled back), each with the snapshot's xmax of the run that
-- missed it: once every transaction below that xmax has ended, a gap that
-- is still not visible never will be, and goes (store/changes_sequence.go).
-- That spares every write a pending row inserted, indexed, deleted and
-- vacuumed. It needs ids in the order they are taken: the sequence keeps
-- bigserial's CACHE 1 (a cache per session would break that). On Citus, where ids come from several nodes' sequences, change
-- rows keep 0006's form (last NULL) and are adopted as before.
DO $$
BEGIN
    -- Each by EXECUTE: see 0007.
    EXECUTE 'ALTER TABLE changes ADD COLUMN last boolean';
    -- Rows of this form have a tag and no position, but are not to adopt.
    EXECUTE 'DROP INDEX changes_unsequenced';
    EXECUTE 'CREATE INDEX changes_unsequenced ON changes (id) WHERE pos IS NULL AND tag IS NOT NULL AND last IS NULL';
END
$$;

-- Renamed, so that a sequencer of the previous release, which would number
-- its pending rows ahead of earlier changes of this release (out of order
-- for an entity written by both), stops with an error; its replicas' feed
-- reads fail until they are replaced, their writes reach the feed.
ALTER TABLE change_sequencer RENAME TO change_numbering;
ALTER TABLE change_numbering
    ADD COLUMN scanned  bigint   NOT NULL DEFAULT 0,
    ADD COLUMN gaps     bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN gap_xmax bigint[] NOT NULL DEFAULT '{}';
-- Every row there is now is numbered or has a pending row.
UPDATE change_numbering SET scanned = (SELECT coalesce(max(id), 0) FROM changes);

-- No statistics of what no query of changes filters, joins or sorts on:
-- ANALYZE sorted every sampled row's properties (jsonb) and keys, more
-- than half of its CPU (0.7-1.2 s for 111,000 changes, 0.35 s without),
-- and autovacuum analyzes changes at every 10% of rows written or purged.
-- Citus refuses the command on a distributed table; the feed is off there
-- by default.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        ALTER TABLE changes ALTER COLUMN props SET STATISTICS 0,
            ALTER COLUMN pk SET STATISTICS 0, ALTER COLUMN rk SET STATISTICS 0;
    END IF;
END
$$;
