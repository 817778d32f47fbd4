-- DDL of changes by EXECUTE: see the up migration.
ALTER TABLE change_sequencer RENAME TO change_feed;
DO $$ BEGIN EXECUTE 'DROP INDEX changes_unsequenced'; END $$;
UPDATE changes c SET pos = p.pos, txn = p.txn, at = p.at
FROM change_positions p WHERE c.dkey = p.dkey AND c.id = p.id;
UPDATE changes c SET pos = NULL, txn = NULL, tag = p.tag, at = p.at
FROM change_pending p WHERE c.dkey = p.dkey AND c.id = p.id;
-- Rows neither numbered nor pending: a deleted table's, whose purge
-- removed the rest of them.
DELETE FROM changes WHERE pos IS NULL AND tag IS NULL;
UPDATE changes SET tag = 0 WHERE tag IS NULL;
DO $$
BEGIN
    EXECUTE 'ALTER TABLE changes ALTER COLUMN tag SET NOT NULL';
    EXECUTE 'ALTER TABLE changes DROP CONSTRAINT changes_pkey';
    EXECUTE 'ALTER TABLE changes ADD PRIMARY KEY (dkey, id)';
    EXECUTE 'CREATE INDEX changes_unsequenced ON changes (id) WHERE pos IS NULL';
    EXECUTE 'CREATE INDEX changes_feed ON changes (table_id, pos) WHERE pos IS NOT NULL';
    EXECUTE 'CREATE INDEX changes_pos ON changes (pos) WHERE pos IS NOT NULL';
END
$$;
DROP TABLE change_positions;
DROP TABLE change_pending;
