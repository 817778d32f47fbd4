// Package filter is the OData $filter engine of the Table service: a pure,
// database-free compiler from a $filter string to a parameterized
// PostgreSQL boolean expression over the stored form of entities.
//
// Parse tokenizes and parses the language of rest-protocol.md §5.1 into an
// AST with byte positions and checks it (at most 15 comparisons, literal
// ranges, unsupported constructs); every rejection wraps
// odata.ErrInvalidInput and names the problem and its position. Compile
// turns the AST into SQL whose only variable parts are $n parameters: no
// text of the request, not even a property name, ever becomes SQL text, and
// the SQL text depends only on the shape of the filter (its operators,
// literal types and which names are key columns), so prepared statements are
// reused across values.
//
// # Semantics (§5.2)
//
// Types are per entity, so each property comparison dispatches on the type
// tag stored with the value. The rules live in one function, typeRule:
//
//   - a missing property makes the comparison SQL NULL: it never matches,
//     also under not (three-valued logic);
//   - values of the same type compare by value: String ordinally (byte order
//     of UTF-8, i.e. code-point order, which differs from .NET's UTF-16 order
//     only between supplementary characters and U+E000..U+FFFF), numbers
//     numerically, false < true, DateTime by instant (100 ns), Guid by its
//     lower-case canonical text, Binary byte-wise with a shorter prefix
//     first;
//   - numeric widening: an Int32 literal against an Int64 value compares as
//     Int64, an Int32 or Int64 literal against a Double value as Double;
//   - any other pair of types is a mismatch, which Azure answers by a type
//     rank: eq, gt and ge are false, ne, lt and le are true.
//
// Doubles follow .NET's Double.CompareTo: NaN equals NaN and is smaller than
// every other value (-Infinity included); -0 equals 0. PostgreSQL orders NaN
// above everything, so the compiled SQL compares the pair
// (value is not NaN, value), which restores the .NET order.
//
// PartitionKey, RowKey (and any other column named in Schema.Strings) are
// Strings compared as plain column predicates (e.pk = $1::text), so the
// planner uses the primary key for point, range and partition queries;
// Timestamp compares the ticks column with a DateTime literal. A literal of
// another type against them is a mismatch constant.
//
// # Extensions beyond Azure's grammar
//
// Operators (eq, and, ...) are accepted in any letter case where only an
// operator can stand; not is also accepted in any case when an operand
// follows it. When a property is compared with a word that is not a keyword
// in lower case but reads as a literal in another case (True, FALSE), or with
// NaN, INF or Infinity (any case; -INF and -Infinity too), the word is taken
// as that literal, since a property-to-property comparison would be an error
// anyway. Bare true and false are constant filters.
package filter
