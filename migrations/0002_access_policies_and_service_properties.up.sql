-- Stored access policies (table ACLs): up to five per table, in the order
-- they were set. They hang off the table's id, not its name: a deleted table
-- keeps its id until purged and a table created under the same name gets a
-- new one, so the policies of a deleted table are never seen again and go
-- with its row.
CREATE TABLE table_acls (
    table_id   bigint NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    policy_id  text COLLATE "C" NOT NULL, -- the SignedIdentifier's Id
    pos        smallint NOT NULL,         -- order in the ACL
    start_at   bigint,                    -- Start in ticks; NULL when not set
    expiry_at  bigint,                    -- Expiry in ticks; NULL when not set
    permission text,                      -- letters in "raud" order; NULL when not set
    PRIMARY KEY (table_id, policy_id)
);

-- Service properties (logging, metrics, CORS rules) per account, as the
-- JSON form of store.ServiceProperties. An account without a row has the
-- defaults.
CREATE TABLE service_properties (
    account text COLLATE "C" PRIMARY KEY,
    props   jsonb NOT NULL
);
