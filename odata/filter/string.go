package filter

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"github.com/pgtables/pgtables/odata"
)

// String renders e as a canonical filter that parses back to the same tree
// (positions aside): property on the left, lower-case keywords, parentheses
// only where needed. For logs and tests.
func (e *Expr) String() string {
	if e == nil {
		return "<nil>"
	}
	return string(e.appendTo(nil))
}

func (e *Expr) appendTo(b []byte) []byte {
	switch {
	case e.Op == OpAnd || e.Op == OpOr:
		for i, x := range e.Args {
			if i > 0 {
				b = append(b, ' ')
				b = append(b, e.Op.String()...)
				b = append(b, ' ')
			}
			// Parentheses only where the tree needs them, so that the
			// rendering nests no deeper than any source of the same tree:
			// an and inside an or, and a not anywhere, bind tighter anyway.
			b = x.appendOperand(b, x.Op == OpOr || x.Op == e.Op)
		}
		return b
	case e.Op == OpNot:
		b = append(b, "not "...)
		if len(e.Args) == 1 {
			x := e.Args[0]
			return x.appendOperand(b, x.Op == OpAnd || x.Op == OpOr)
		}
		return append(b, "<bad not>"...)
	case e.Op == OpConst:
		return strconv.AppendBool(b, e.Value.Bool)
	case e.Op.IsComparison():
		b = append(b, e.Name...)
		if e.Bare {
			return b
		}
		b = append(b, ' ')
		b = append(b, e.Op.String()...)
		b = append(b, ' ')
		return AppendLiteral(b, e.Value)
	}
	return append(b, e.Op.String()...)
}

func (e *Expr) appendOperand(b []byte, parens bool) []byte {
	if parens {
		b = append(b, '(')
		b = e.appendTo(b)
		return append(b, ')')
	}
	return e.appendTo(b)
}

// AppendLiteral appends v as an OData literal that Parse reads back as v:
// a quoted string with quotes doubled, 5, 5L, 5.0, NaN, INF, -INF, true,
// datetime'...', guid'...' or X'..'.
func AppendLiteral(b []byte, v odata.Value) []byte {
	switch v.Type {
	case odata.EdmString:
		b = append(b, '\'')
		b = append(b, strings.ReplaceAll(v.Str, "'", "''")...)
		return append(b, '\'')
	case odata.EdmInt32:
		return strconv.AppendInt(b, v.Int, 10)
	case odata.EdmInt64:
		return append(strconv.AppendInt(b, v.Int, 10), 'L')
	case odata.EdmDouble:
		switch {
		case math.IsNaN(v.Float):
			return append(b, "NaN"...)
		case math.IsInf(v.Float, 1):
			return append(b, "INF"...)
		case math.IsInf(v.Float, -1):
			return append(b, "-INF"...)
		}
		return odata.AppendDouble(b, v.Float)
	case odata.EdmBoolean:
		return strconv.AppendBool(b, v.Bool)
	case odata.EdmDateTime:
		b = append(b, "datetime'"...)
		b = odata.AppendDateTime(b, v.Int, false)
		return append(b, '\'')
	case odata.EdmGuid:
		b = append(b, "guid'"...)
		b = append(b, v.Str...)
		return append(b, '\'')
	case odata.EdmBinary:
		b = append(b, "X'"...)
		b = hex.AppendEncode(b, v.Bytes)
		return append(b, '\'')
	}
	return append(b, "<bad literal>"...)
}
