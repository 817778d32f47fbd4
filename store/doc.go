// Package store keeps tables and entities in PostgreSQL (pgx v5). It speaks
// in domain types (odata.Entity, odata.Property) and sentinel errors, never
// in HTTP, and is the only package that writes SQL, apart from the $filter
// compiler in odata/filter whose output it runs.
//
// # Schema
//
// One row per table in "tables" (account, name as created, lower-cased name,
// deleted_at) and one row per entity in "entities", keyed by
// (table_id, pk, rk) with the keys in COLLATE "C" so that PostgreSQL orders
// them ordinally, as the service must. The primary-key B-tree serves point
// reads, partition scans, key ranges and keyset paging.
//
// # Property encoding
//
// All user properties of an entity live in one jsonb column, each as a
// two-element array of a type tag and a value:
//
//	{"Age": ["i32", 23], "Big": ["i64", "-9223372036854775808"],
//	 "Ratio": ["dbl", "0.1"], "Nan": ["dbl", "NaN"], "Ok": ["bool", true],
//	 "When": ["dt", "2026-11-22T01:02:03.1234567Z"],
//	 "Id": ["guid", "c9da6455-213d-42c9-9a79-3e9149a57833"],
//	 "Raw": ["bin", "AAEC"], "Name": ["str", "Zoë"]}
//
// Why this shape:
//   - The type travels with each value, because types are per entity and a
//     filter must demand the right one: the type test is one text comparison
//     (props->'Age'->>0 = 'i32') and mismatching types never compare.
//   - Every value is in the form SQL compares natively: i32 as a number, i64
//     as decimal text cast to bigint (no detour through float), dbl as the
//     text of the shortest round-trip form cast to float8 (which also reads
//     NaN and ±Infinity, which jsonb numbers cannot hold), DateTime as
//     fixed-width UTC text with 7 fractional digits so that text order is
//     time order at 100 ns precision, Guid lower-case, Binary base64 decoded
//     with decode(..., 'base64') for byte order.
//   - The read path stays cheap: each value is already in, or one step from,
//     its wire form, so decoding a row is a single scan of the jsonb text.
//   - Strings go through odata.StoredString, an order-preserving escape of
//     U+0000 (which PostgreSQL refuses in text and jsonb) and U+0001, so that
//     every string Azure accepts round-trips and compares exactly.
//
// jsonb does not keep member order, so properties come back ordered by
// name length and then bytes rather than in the order written; no client
// depends on the order.
//
// # Timestamps and ETags
//
// The Timestamp is kept in ticks (100 ns since 0001-01-01 UTC) in a bigint,
// computed in Go and passed as a parameter; every write sets it to
// GREATEST(now, previous + 1 tick), so it strictly increases per entity even
// across replicas with skewed clocks. The ETag combines it with the row's
// xmin and a hash of the keys (see formatETag), so every write yields a new
// ETag, the entities of one batch each get their own, and a conditional
// write is one statement comparing Timestamp and xmin.
//
// # Round trips under load
//
// Point reads and single-entity writes go through combiners: while few are
// in flight each is its own statement, and beyond that concurrent ones
// share a pipelined round trip (and writes a commit) on one connection.
// See combiner for the rules that keep this invisible to clients.
//
// # Deleting tables
//
// Delete Table only marks the table row deleted, which frees the name at
// once; the purger removes the entities in bounded chunks in the background
// and drops the row last. Entities are never reachable through a deleted
// table because every statement resolves the table by its live name.
package store
