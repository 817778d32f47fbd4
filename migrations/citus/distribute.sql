-- Distributes the schema on Citus: entities by their distribution key
-- (migration 0003), in citus.shard_count shards (see below); the small relations,
-- read by every request or joined with entities, as reference tables, a
-- copy on every node. Each relation that is not yet what it should be
-- becomes it, with its rows, so this distributes a fresh schema, one
-- restored from a single node's dump, or a single node's database in
-- place once the extension is installed there.
DO $$
DECLARE
    name text;
    converted text[] := ARRAY[]::text[];
BEGIN
    -- By name, each time: once tables is a reference table, Citus has
    -- made table_acls (its foreign key) a local table of its own, whose
    -- name now stands for another relation than before.
    FOREACH name IN ARRAY ARRAY['tables', 'table_acls', 'property_indexes', 'service_properties'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = name::regclass AND repmodel = 't') THEN
            PERFORM create_reference_table(name::regclass);
            converted := converted || name;
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'entities'::regclass) THEN
        -- Unless the session or the server's configuration chose a shard
        -- count, 4 per worker, at least 8, rather than Citus's 32: a query
        -- across partitions runs on every shard, and pays for each.
        IF (SELECT s.source FROM pg_settings s WHERE s.name = 'citus.shard_count') = 'default' THEN
            PERFORM set_config('citus.shard_count', greatest(8, 4 * (
                SELECT count(*) FROM pg_dist_node
                WHERE groupid <> 0 AND noderole = 'primary' AND isactive AND shouldhaveshards))::text, true);
        END IF;
        PERFORM create_distributed_table('entities', 'dkey');
        converted := converted || 'entities'::text;
    END IF;
    -- The change feed's rows go with their entities' shards (migrations
    -- 0006, 0007), so that a write and its change rows are one routed
    -- statement, and a change's position joins its row on its shard. The
    -- sequencer's one row (change_sequencer) stays on the coordinator.
    FOREACH name IN ARRAY ARRAY['changes', 'change_pending', 'change_positions'] LOOP
        -- (A schema of an older release lacks the later ones.)
        CONTINUE WHEN to_regclass(name) IS NULL;
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = name::regclass) THEN
            PERFORM create_distributed_table(name::regclass, 'dkey', colocate_with => 'entities');
            converted := converted || name;
        END IF;
    END LOOP;
    -- The rows copied to the nodes stay on the coordinator's disk, unseen,
    -- until this.
    FOREACH name IN ARRAY converted LOOP
        PERFORM truncate_local_data_after_distributing_table(name::regclass);
    END LOOP;
END
$$;
