-- On Citus, entities go back to the coordinator first (see
-- citus/distribute.sql): a distribution column cannot be dropped. One shard
-- at a time, so that the same transaction may then change the table. The
-- small relations stay reference tables.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'entities'::regclass) THEN
            PERFORM undistribute_table('entities');
        END IF;
    END IF;
END
$$;
DROP STATISTICS entities_pk_dkey;
ALTER TABLE entities DROP CONSTRAINT entities_pkey, ADD PRIMARY KEY (table_id, pk, rk);
ALTER TABLE entities DROP COLUMN dkey;
DROP FUNCTION entity_dkey(text, text, text);
