-- An entity group transaction of inserts records its changes in one change
-- row (store/changes.go): its row keys in rks and the entities in
-- entities, in the batch's order; op, pk, ts and xid are those of every
-- one of them. Its position row (change_positions) then stands for n
-- positions, the last of which is pos: one heap row and one index entry
-- of each index for the whole batch, where a row per entity cost the feed
-- more than the batch's own insert (README: Change feed). Other change
-- rows hold one change, n 1.
-- Each by EXECUTE: see 0007.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE changes ADD COLUMN rks text[] COLLATE "C", ADD COLUMN entities jsonb[]';
    EXECUTE 'ALTER TABLE change_positions ADD COLUMN n integer NOT NULL DEFAULT 1';
    -- Without a default from now on: a sequencer of the previous
    -- release, which would number a batch's row as one change, fails.
    EXECUTE 'ALTER TABLE change_positions ALTER COLUMN n DROP DEFAULT';
END
$$;

-- Renamed, so that the previous release's sequencer stops (with an
-- error), and so do its readers, which would read a batch's change row as
-- one change without its entity; its replicas' writes go on and reach the
-- feed (README: Upgrades).
ALTER TABLE change_numbering RENAME TO change_counter;

-- A batch's entities (up to 4 MiB) are compressed in TOAST; by lz4 where
-- PostgreSQL has it, at a fraction of the CPU of pglz, the default. Not on
-- Citus, whose batches record a row per entity (changes_citus.go).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        ALTER TABLE changes ALTER COLUMN entities SET COMPRESSION lz4;
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    NULL; -- built without lz4: pglz
END
$$;
