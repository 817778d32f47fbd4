DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM undistribute_table('entities');
        PERFORM undistribute_table('service_properties');
        PERFORM undistribute_table('table_acls', cascade_via_foreign_keys => true);
    END IF;
END
$$;
DROP STATISTICS entities_pk_dkey;
ALTER TABLE entities DROP CONSTRAINT entities_pkey, ADD PRIMARY KEY (table_id, pk, rk);
ALTER TABLE entities DROP COLUMN dkey;
DROP FUNCTION entity_dkey(text, text, text);
