-- Tables of every account. A deleted table keeps its row (deleted_at set)
-- until the purger has removed its entities, so that its name is free at
-- once (the unique index covers live tables only) while the purge runs.
CREATE TABLE tables (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL, -- as created
    lname      text COLLATE "C" NOT NULL, -- lower(name): lookups, uniqueness, listing order
    created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz
);

CREATE UNIQUE INDEX tables_live_name ON tables (account, lname) WHERE deleted_at IS NULL;
CREATE INDEX tables_deleted ON tables (deleted_at) WHERE deleted_at IS NOT NULL;

-- Entities of all tables. The primary key is the clustered index of the
-- design: point reads, partition scans, key ranges and keyset paging are
-- range scans on it. Keys sort ordinally (COLLATE "C").
CREATE TABLE entities (
    table_id bigint NOT NULL,
    pk       text COLLATE "C" NOT NULL,
    rk       text COLLATE "C" NOT NULL,
    ts       bigint NOT NULL,  -- Timestamp in ticks (100 ns since 0001-01-01 UTC)
    size     integer NOT NULL, -- upper bound of the entity's size by Azure's formula
    props    jsonb NOT NULL,   -- user properties in the stored form (store package doc)
    PRIMARY KEY (table_id, pk, rk)
) WITH (fillfactor = 90);
