-- The change feed (store/changes.go, docs/changefeed.md). Every entity
-- write of an account with the feed on adds a row here in the statement
-- that writes the entity, so a change commits or rolls back with its
-- write. Rows are written without a position; the sequencer numbers the
-- committed ones (pos, txn) in the order it finds them, so positions follow
-- commit visibility and a reader resuming after a position misses nothing.
-- Distributed on Citus by dkey, colocated with entities: the change row
-- goes to the entity's shard in the same routed statement.
CREATE TABLE changes (
    dkey     bigint NOT NULL,           -- of the entity's partition (migration 0003)
    id       bigserial NOT NULL,        -- write order on a node
    table_id bigint NOT NULL,
    tag      bigint NOT NULL,           -- the writing transaction's, chosen by pgtables: groups a transaction's changes
    op       smallint NOT NULL,         -- 1 insert, 2 replace, 3 merge, 4 delete
    pk       text COLLATE "C" NOT NULL,
    rk       text COLLATE "C" NOT NULL,
    ts       bigint,                    -- the entity's Timestamp after the change (ticks); NULL for a delete
    xid      bigint,                    -- the entity version's xmin, for its ETag; NULL for a delete
    props    jsonb,                     -- the entity after the change, stored form; NULL for a delete
    at       timestamptz NOT NULL DEFAULT now(),
    pos      bigint,                    -- feed position, NULL until sequenced
    txn      bigint,                    -- position of the first change of its transaction
    PRIMARY KEY (dkey, id)
);
-- The sequencer's work, and the feed's reads and retention.
CREATE INDEX changes_unsequenced ON changes (id) WHERE pos IS NULL;
CREATE INDEX changes_feed ON changes (table_id, pos) WHERE pos IS NOT NULL;
CREATE INDEX changes_pos ON changes (pos) WHERE pos IS NOT NULL;

-- The sequencer's state, one row: the last position given, the last one
-- readers may read (all positions up to it committed everywhere), and the
-- last one purged by retention.
CREATE TABLE change_feed (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    last    bigint NOT NULL DEFAULT 0,
    visible bigint NOT NULL DEFAULT 0,
    purged  bigint NOT NULL DEFAULT 0
);
INSERT INTO change_feed DEFAULT VALUES;
