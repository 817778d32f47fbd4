-- The statistics of changes, as before (see the up migration).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        ALTER TABLE changes ALTER COLUMN props SET STATISTICS -1,
            ALTER COLUMN pk SET STATISTICS -1, ALTER COLUMN rk SET STATISTICS -1;
    END IF;
END
$$;
-- Back to 0007: the unnumbered change rows of 0008's form get a pending
-- row, and every row of that form loses its tag, which 0007's sequencer
-- would take for an older release's row to adopt.
INSERT INTO change_pending (dkey, id, table_id, tag, at)
SELECT c.dkey, c.id, c.table_id, c.tag, c.at FROM changes c
WHERE c.last IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM change_positions p WHERE p.dkey = c.dkey AND p.id = c.id);
UPDATE changes SET tag = NULL WHERE last IS NOT NULL;
ALTER TABLE change_numbering DROP COLUMN scanned, DROP COLUMN gaps, DROP COLUMN gap_xmax;
ALTER TABLE change_numbering RENAME TO change_sequencer;
-- DDL of changes by EXECUTE: see 0007's up migration.
DO $$
BEGIN
    EXECUTE 'DROP INDEX changes_unsequenced';
    EXECUTE 'ALTER TABLE changes DROP COLUMN last';
    EXECUTE 'CREATE INDEX changes_unsequenced ON changes (id) WHERE pos IS NULL AND tag IS NOT NULL';
END
$$;
