-- Back to a change row per entity: each change row of a batch becomes a
-- row per entity, with ids of their own from the sequence, and a numbered
-- one a position row per entity, with the positions it stood for. The
-- sequencer of 0008 reads the rows above its watermark (scanned) and in
-- its gaps: the numbered rows' new ids go below a new watermark and the
-- ids between the old and the new one that are not theirs into its gaps,
-- so that it numbers the unnumbered rows there (not the numbered ones),
-- and those of unnumbered batches, whose new ids come last, above it.
ALTER TABLE change_counter RENAME TO change_numbering;

CREATE TEMPORARY TABLE batch_changes ON COMMIT DROP AS
SELECT c.dkey, c.id, c.table_id, c.tag, c.op, c.pk, e.rk, c.ts, c.xid, e.props, c.at,
       e.i = cardinality(c.rks) AS last, p.pos - p.n + e.i AS pos, p.txn, p.at AS pat
FROM changes c
LEFT JOIN change_positions p ON p.dkey = c.dkey AND p.id = c.id
CROSS JOIN LATERAL unnest(c.rks, c.entities) WITH ORDINALITY AS e(rk, props, i)
WHERE c.rks IS NOT NULL;
ALTER TABLE batch_changes ADD COLUMN new_id bigint;
UPDATE batch_changes b SET new_id = o.new_id
FROM (SELECT id, rk, nextval('changes_id_seq') AS new_id
      FROM (SELECT id, rk FROM batch_changes ORDER BY pos IS NULL, id, pos, rk) s) o
WHERE o.id = b.id AND o.rk = b.rk;

CREATE TEMPORARY TABLE batch_watermark ON COMMIT DROP AS
SELECT coalesce(array_agg(g ORDER BY g), '{}') AS gaps
FROM change_numbering n,
     generate_series(n.scanned + 1, (SELECT max(new_id) FROM batch_changes WHERE pos IS NOT NULL)) g
WHERE g NOT IN (SELECT new_id FROM batch_changes WHERE pos IS NOT NULL);
UPDATE change_numbering n SET
    gaps = n.gaps || w.gaps,
    gap_xmax = n.gap_xmax || array_fill(pg_current_xact_id()::text::bigint, ARRAY[cardinality(w.gaps)]),
    scanned = (SELECT max(new_id) FROM batch_changes WHERE pos IS NOT NULL)
FROM batch_watermark w
WHERE EXISTS (SELECT 1 FROM batch_changes WHERE pos IS NOT NULL);

INSERT INTO changes (dkey, id, table_id, tag, last, op, pk, rk, ts, xid, props, at)
SELECT dkey, new_id, table_id, tag, last, op, pk, rk, ts, xid, props, at FROM batch_changes;
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at, n)
SELECT dkey, new_id, table_id, pos, txn, pat, 1 FROM batch_changes WHERE pos IS NOT NULL;
DELETE FROM change_positions WHERE (dkey, id) IN (SELECT dkey, id FROM batch_changes);
DELETE FROM changes WHERE (dkey, id) IN (SELECT dkey, id FROM batch_changes);

-- Each by EXECUTE: see 0007.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE change_positions DROP COLUMN n';
    EXECUTE 'ALTER TABLE changes DROP COLUMN rks, DROP COLUMN entities';
END
$$;
