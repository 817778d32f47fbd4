package filter

import (
	"fmt"
	"strconv"
	"strings"
)

// entitySchema and tableSchema are the two schemas the store compiles for.
var (
	entitySchema = Schema{
		Strings:    map[string]string{"PartitionKey": "e.pk", "RowKey": "e.rk"},
		Timestamp:  "e.ts",
		Properties: "e.props",
	}
	tableSchema = Schema{Strings: map[string]string{"TableName": "t.name"}}
)

// sqlWords is everything the compiler may write besides schema SQL and
// parameters.
var sqlWords = map[string]bool{
	"CASE": true, "WHEN": true, "THEN": true, "ELSE": true, "END": true,
	"AND": true, "OR": true, "NOT": true, "IS": true, "NULL": true, "IN": true,
	"TRUE": true, "FALSE": true,
	"text": true, "bigint": true, "float8": true, "boolean": true, "bytea": true,
	"decode": true,
}

var sqlPunct = []string{"~>=~", "~<=~", "->>", "~>~", "~<~", "::", "->", "<>", "<=", ">=", "=", "<", ">", "(", ")", ",", "."}

// checkSQL tokenizes compiled SQL and fails unless it consists only of
// fixed words, words of the schema's SQL, the numbers 0 and 1 (jsonb array
// indexes), operators and $n parameters that match args one to one. So no
// text of a filter can have reached it.
func checkSQL(sql string, args []any, first int, s Schema) error {
	allowed := func(w string) bool {
		if sqlWords[w] {
			return true
		}
		schemaSQL := []string{s.Timestamp, s.Properties}
		for _, c := range s.Strings {
			schemaSQL = append(schemaSQL, c)
		}
		for _, c := range schemaSQL {
			for _, part := range strings.FieldsFunc(c, func(r rune) bool { return !isWordByte(byte(r)) }) {
				if part == w {
					return true
				}
			}
		}
		return false
	}
	used := make([]bool, len(args))
	depth := 0
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ':
			i++
		case c == '$':
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			n, err := strconv.Atoi(sql[i+1 : j])
			if err != nil || n < first || n >= first+len(args) {
				return fmt.Errorf("parameter %q out of range at %d", sql[i:j], i)
			}
			used[n-first] = true
			if !strings.HasPrefix(sql[j:], "::") {
				return fmt.Errorf("parameter %s without a cast at %d", sql[i:j], i)
			}
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			if w := sql[i:j]; w != "0" && w != "1" {
				return fmt.Errorf("number %q at %d", w, i)
			}
			i = j
		case isWordByte(c):
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			if w := sql[i:j]; !allowed(w) {
				return fmt.Errorf("word %q at %d is not allowed", w, i)
			}
			i = j
		default:
			ok := false
			for _, p := range sqlPunct {
				if strings.HasPrefix(sql[i:], p) {
					switch p {
					case "(":
						depth++
					case ")":
						depth--
						if depth < 0 {
							return fmt.Errorf("unbalanced ')' at %d", i)
						}
					}
					i += len(p)
					ok = true
					break
				}
			}
			if !ok {
				return fmt.Errorf("unexpected %q at %d", sql[i], i)
			}
		}
	}
	if depth != 0 {
		return fmt.Errorf("unbalanced parentheses")
	}
	for i, u := range used {
		if !u {
			return fmt.Errorf("parameter $%d is not used", first+i)
		}
		switch v := args[i].(type) {
		case string, int64, float64, bool:
		case []byte:
			if v == nil {
				return fmt.Errorf("parameter $%d is a nil []byte (NULL)", first+i)
			}
		default:
			return fmt.Errorf("parameter $%d has type %T", first+i, v)
		}
	}
	return nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
