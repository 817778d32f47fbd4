-- Property indexes (store/indexes.go): one row per index declared on a
-- table's property and EDM type. The index itself is a partial expression
-- index on entities named by "name", built with CREATE INDEX CONCURRENTLY
-- after this row is written (state building), then marked ready, or failed
-- with the error once the build's leftovers are dropped. Rows hang off the
-- table's id, like ACLs: a table created again under the same name never
-- sees the indexes of the one before; the purger drops the indexes of a
-- deleted table before its row, which takes these rows with it.
CREATE TABLE property_indexes (
    table_id   bigint NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    name       text COLLATE "C" NOT NULL, -- of the PostgreSQL index: pi_<table id>_<hash of the spec>
    property   text COLLATE "C" NOT NULL,
    type       text NOT NULL,             -- EDM name, e.g. Edm.Int32
    after_pk   boolean NOT NULL,          -- (PartitionKey, value, RowKey) rather than (value, PartitionKey, RowKey)
    state      text NOT NULL DEFAULT 'building' CHECK (state IN ('building', 'ready', 'failed')),
    error      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, name)
);
