-- The indexes go with their catalog: every pi_ index on entities.
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE i.indrelid = 'entities'::regclass AND c.relname LIKE 'pi\_%' LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', idx);
    END LOOP;
END
$$;
DROP TABLE property_indexes;
