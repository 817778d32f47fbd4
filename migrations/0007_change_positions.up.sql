-- The change feed writes each change row once (store/changes*.go). Under
-- 0006 the sequencer numbered a change by updating its row: a second copy
-- of the entity's properties, three more index entries and a dead row
-- version for vacuum, which made a write with the feed on cost up to half
-- as much again. Now a write adds, beside the change row, a narrow row to
-- change_pending in the same statement; the sequencer deletes the pending
-- rows that have committed and writes their positions to change_positions,
-- which readers join with changes.
CREATE TABLE change_pending (
    dkey     bigint NOT NULL,           -- of the change row
    id       bigint NOT NULL,           -- of the change row
    table_id bigint NOT NULL,
    tag      bigint NOT NULL,           -- the writing transaction's (0006)
    at       timestamptz NOT NULL DEFAULT now()   -- when that transaction began
);
CREATE INDEX change_pending_id ON change_pending (id);

CREATE TABLE change_positions (
    dkey     bigint NOT NULL,           -- of the change row
    id       bigint NOT NULL,           -- of the change row
    table_id bigint NOT NULL,
    pos      bigint NOT NULL,           -- feed position
    txn      bigint NOT NULL,           -- position of the first change of its transaction
    at       timestamptz NOT NULL       -- when the writing transaction began: retention, a delete's Timestamp
);
CREATE INDEX change_positions_feed ON change_positions (table_id, pos);
-- Retention's. The sequencer inserts in position order, at the index's
-- right edge.
CREATE INDEX change_positions_pos ON change_positions (pos);

-- The feed carries on: its numbered changes keep their positions; the
-- sequencer takes the unnumbered ones over (below).
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at)
SELECT dkey, id, table_id, pos, txn, at FROM changes WHERE pos IS NOT NULL;

-- The columns stay while replicas of the previous release may run beside
-- this one (README: Upgrades): their writes still fill tag and leave pos
-- NULL, and the sequencer takes such rows over (sqlAdoptChanges: pending,
-- with pos 0). Rows of this release leave tag, pos and txn NULL, so that
-- no index below holds them.
-- Each by EXECUTE: where changes is distributed already (Citus), Citus
-- sends a DDL statement's text to the nodes, which refuse the several
-- statements of this file.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE changes ALTER COLUMN tag DROP NOT NULL';
    -- Ids first: a write's change row then goes to the right edge of the
    -- key, not to a page chosen by the partition's hash, which costs a
    -- random page (and its full image in the WAL after every checkpoint)
    -- per write.
    EXECUTE 'ALTER TABLE changes DROP CONSTRAINT changes_pkey';
    EXECUTE 'ALTER TABLE changes ADD PRIMARY KEY (id, dkey)';
    EXECUTE 'DROP INDEX changes_feed';
    EXECUTE 'DROP INDEX changes_pos';
    EXECUTE 'DROP INDEX changes_unsequenced';
    EXECUTE 'CREATE INDEX changes_unsequenced ON changes (id) WHERE pos IS NULL AND tag IS NOT NULL';
END
$$;

-- Renamed, so that a previous release's sequencer, which would number
-- rows in changes where this release's readers do not look, stops (with
-- an error) instead; its replicas' feed reads fail until they are
-- replaced, their writes go on and reach the feed.
ALTER TABLE change_feed RENAME TO change_sequencer;
