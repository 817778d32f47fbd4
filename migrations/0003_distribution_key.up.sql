-- The distribution key of an entity: a hash of (account, table name in
-- lower case, PartitionKey), the first 8 bytes of the MD5 of
-- "<account>/<lname>/<pk>" ('/' can be in none of the three). One
-- partition has one value, so on Citus it lives on one shard while the
-- partitions of a table spread over all of them; the store computes it
-- from the request (store.distributionKey; entity_dkey is the same in SQL,
-- for this migration and for operators) and names it in every
-- statement on entities, so that Citus sends the statement to the one
-- shard that holds the partition. On plain PostgreSQL it is one more
-- column of the primary key. Entities of a table whose row is already gone
-- can never be read again: they go.
CREATE FUNCTION entity_dkey(account text, lname text, pk text) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ('x' || left(md5(account || '/' || lname || '/' || pk), 16))::bit(64)::bigint;

ALTER TABLE entities ADD COLUMN dkey bigint;
UPDATE entities e SET dkey = entity_dkey(t.account, t.lname, e.pk) FROM tables t WHERE t.id = e.table_id;
DELETE FROM entities WHERE dkey IS NULL;
ALTER TABLE entities ALTER COLUMN dkey SET NOT NULL;
ALTER TABLE entities DROP CONSTRAINT entities_pkey, ADD PRIMARY KEY (table_id, pk, rk, dkey);
-- dkey follows from pk (within a table): without knowing it, the planner
-- takes "pk = $x AND dkey = $y" for far fewer rows than pk alone, and
-- scans a partition rather than the ranges of its RowKey conditions.
CREATE STATISTICS entities_pk_dkey (dependencies) ON pk, dkey FROM entities;

-- Where the citus extension is installed, distribute: entities by their
-- key, in citus.shard_count shards (pgtables migrate sets it from
-- PGTABLES_CITUS_SHARD_COUNT); the small relations, read by every request
-- or joined with entities, as reference tables, a copy on every node.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM create_reference_table('tables');
        PERFORM create_reference_table('table_acls');
        PERFORM create_reference_table('service_properties');
        PERFORM create_distributed_table('entities', 'dkey');
        -- The rows copied to the nodes stay on the coordinator's disk, unseen,
        -- until this.
        PERFORM truncate_local_data_after_distributing_table(r)
        FROM unnest(ARRAY['tables', 'table_acls', 'service_properties', 'entities']::regclass[]) AS r;
    END IF;
END
$$;
