-- The distribution key of an entity: a hash of (account, table name in
-- lower case, PartitionKey), the first 8 bytes of the MD5 of
-- "<account>/<lname>/<pk>" ('/' can be in none of the three). One
-- partition has one value, so on Citus it lives on one shard while the
-- partitions of a table spread over all of them; the store computes it
-- from the request (store.distributionKey; entity_dkey is the same in SQL,
-- for this migration and for operators) and names it in every
-- statement on entities, so that Citus sends the statement to the one
-- shard that holds the partition (distribute.sql). On plain PostgreSQL
-- it is one more column of the primary key. Entities of a table whose row is already gone
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
