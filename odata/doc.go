// Package odata holds the OData side of the Azure Table protocol, pure and
// free of any database or HTTP code: the eight EDM types and their values,
// the entity JSON codec for the three metadata levels, the $filter compiler,
// $select/$top parsing, continuation tokens, and the sentinel errors that
// input validation reports.
//
// Values are kept in the exact form the protocol needs to round-trip them:
// Int64 never passes through float64, DateTime keeps 100 ns ticks, and every
// string is valid UTF-8 that PostgreSQL can store (see StoredString).
package odata
