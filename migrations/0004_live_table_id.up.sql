-- The id of the live table of that name, or NULL. On Citus an entity write
-- names its table's id through this function in INSERT ... VALUES: the
-- coordinator evaluates it (a read of the reference table) and routes the
-- statement to the partition's shard, where INSERT ... SELECT FROM tables
-- would run in two steps through the coordinator (store/entities.go).
CREATE FUNCTION live_table_id(account text, lname text) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT id FROM tables WHERE tables.account = $1 AND tables.lname = $2 AND deleted_at IS NULL $$;
