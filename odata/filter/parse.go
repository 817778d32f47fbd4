package filter

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/pgtables/pgtables/odata"
)

// Limits of a filter. MaxComparisons is the service's documented limit;
// MaxDepth only keeps recursion bounded, far above any real filter.
const (
	MaxComparisons = 15
	MaxDepth       = 64
)

// Op is the operator of an expression node.
type Op uint8

// Operators. Eq..Le are comparisons, And and Or have two or more operands,
// Not one, and Const is a constant true or false filter.
const (
	OpEq Op = iota + 1
	OpNe
	OpGt
	OpGe
	OpLt
	OpLe
	OpAnd
	OpOr
	OpNot
	OpConst
)

var opNames = [...]string{
	OpEq: "eq", OpNe: "ne", OpGt: "gt", OpGe: "ge", OpLt: "lt", OpLe: "le",
	OpAnd: "and", OpOr: "or", OpNot: "not", OpConst: "const",
}

// String returns the OData keyword of op.
func (op Op) String() string {
	if int(op) < len(opNames) && opNames[op] != "" {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// IsComparison reports whether op is one of eq, ne, gt, ge, lt, le.
func (op Op) IsComparison() bool { return op >= OpEq && op <= OpLe }

// Flip returns the comparison that holds with the operands swapped:
// 'a' lt PartitionKey is PartitionKey gt 'a'.
func (op Op) Flip() Op {
	switch op {
	case OpGt:
		return OpLt
	case OpGe:
		return OpLe
	case OpLt:
		return OpGt
	case OpLe:
		return OpGe
	}
	return op
}

func relOp(word string) (Op, bool) {
	if len(word) != 2 {
		return 0, false
	}
	for op := OpEq; op <= OpLe; op++ {
		if strings.EqualFold(word, opNames[op]) {
			return op, true
		}
	}
	return 0, false
}

// Expr is a node of a parsed filter. Positions are byte offsets into the
// filter string.
//
// A comparison is normalized to have the property on the left: Name Op
// Value. A bare Boolean property is the comparison Name eq true with Bare
// set. A constant (OpConst) keeps its Boolean in Value.
type Expr struct {
	Op   Op
	Pos  int     // first byte of the node
	Args []*Expr // OpAnd, OpOr: two or more operands in order; OpNot: one

	Name     string      // comparison: the property
	NamePos  int         // comparison: where the property name stands
	Value    odata.Value // comparison: the literal; OpConst: its Boolean
	ValuePos int         // comparison: where the literal stands
	Bare     bool        // comparison written as a bare Boolean property
}

// Parse parses and checks a $filter expression. Errors wrap
// odata.ErrInvalidInput via odata.Detailf, with a message naming the problem
// and its 0-based byte position. The empty filter is an error: callers treat
// an empty $filter as no filter before they call Parse.
func Parse(s string) (*Expr, error) {
	if !utf8.ValidString(s) {
		i := 0
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return nil, errAt(i, "invalid UTF-8")
	}
	p := parser{lx: lexer{src: s}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, errAt(p.tok.pos, "empty filter")
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.unexpected("'and', 'or' or the end of the filter")
	}
	return e, nil
}

// errAt is the one constructor of parse errors.
func errAt(pos int, format string, args ...any) error {
	return odata.Detailf(odata.ErrInvalidInput, "Invalid $filter: %s at position %d.", fmt.Sprintf(format, args...), pos)
}

type parser struct {
	lx       lexer
	tok      token // current token
	ahead    token // next token when hasAhead
	hasAhead bool
	depth    int
	leaves   int
}

func (p *parser) advance() error {
	if p.hasAhead {
		p.tok, p.hasAhead = p.ahead, false
		return nil
	}
	t, err := p.lx.next()
	p.tok = t
	return err
}

func (p *parser) peek() (token, error) {
	if !p.hasAhead {
		t, err := p.lx.next()
		if err != nil {
			return token{}, err
		}
		p.ahead, p.hasAhead = t, true
	}
	return p.ahead, nil
}

func (p *parser) text(t token) string { return p.lx.src[t.pos:t.end] }

// isWord reports whether the current token is the word w in any case; it is
// used only where nothing but an operator may stand.
func (p *parser) isWord(w string) bool {
	return p.tok.kind == tWord && strings.EqualFold(p.text(p.tok), w)
}

// binaryWords are the words that can only be binary operators, supported or
// not; they never begin an operand.
var binaryWords = [...]string{"and", "or", "eq", "ne", "gt", "ge", "lt", "le",
	"add", "sub", "mul", "div", "mod", "has"}

func isBinaryWord(w string) bool {
	for _, b := range binaryWords {
		if strings.EqualFold(w, b) {
			return true
		}
	}
	return false
}

// unexpected describes the current token where something else was expected.
func (p *parser) unexpected(expected string) error {
	t := p.tok
	switch t.kind {
	case tEOF:
		return errAt(t.pos, "expected %s, found the end of the filter", expected)
	case tRParen:
		return errAt(t.pos, "unbalanced ')'")
	case tWord:
		w := p.text(t)
		switch strings.ToLower(w) {
		case "add", "sub", "mul", "div", "mod":
			return errAt(t.pos, "arithmetic operator '%s' is not supported", w)
		case "has":
			return errAt(t.pos, "operator 'has' is not supported")
		}
	}
	return errAt(t.pos, "expected %s, found '%s'", expected, clip(p.text(t)))
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return errAt(pos, "nesting deeper than %d levels", MaxDepth)
	}
	return nil
}

// parseOr: andExpr *( "or" andExpr )
func (p *parser) parseOr() (*Expr, error) {
	return p.parseChain(OpOr, p.parseAnd)
}

// parseAnd: notExpr *( "and" notExpr )
func (p *parser) parseAnd() (*Expr, error) {
	return p.parseChain(OpAnd, p.parseNot)
}

func (p *parser) parseChain(op Op, operand func() (*Expr, error)) (*Expr, error) {
	first, err := operand()
	if err != nil || !p.isWord(op.String()) {
		return first, err
	}
	e := &Expr{Op: op, Pos: first.Pos, Args: []*Expr{first}}
	for p.isWord(op.String()) {
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := operand()
		if err != nil {
			return nil, err
		}
		e.Args = append(e.Args, x)
	}
	return e, nil
}

// parseNot: "not" notExpr / primary
func (p *parser) parseNot() (*Expr, error) {
	if p.tok.kind == tWord {
		isNot, err := p.atNot()
		if err != nil {
			return nil, err
		}
		if isNot {
			pos := p.tok.pos
			if err := p.enter(pos); err != nil {
				return nil, err
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
			x, err := p.parseNot()
			if err != nil {
				return nil, err
			}
			p.depth--
			return &Expr{Op: OpNot, Pos: pos, Args: []*Expr{x}}, nil
		}
	}
	return p.parsePrimary()
}

// atNot reports whether the current word is the not operator: always in
// lower case, in another case only when an operand follows (otherwise it is
// a property named, say, Not).
func (p *parser) atNot() (bool, error) {
	w := p.text(p.tok)
	if w == "not" {
		return true, nil
	}
	if !strings.EqualFold(w, "not") {
		return false, nil
	}
	next, err := p.peek()
	if err != nil {
		return false, err
	}
	switch next.kind {
	case tLParen, tLiteral:
		return true, nil
	case tWord:
		return !isBinaryWord(p.text(next)), nil
	}
	return false, nil
}

// operand is one side of a comparison: a word (a property, or a literal
// spelled as a word) or a literal.
type operand struct {
	pos    int
	word   string // set for words
	lit    odata.Value
	isWord bool
}

// primary: "(" orExpr ")" / comparison / boolOperand
func (p *parser) parsePrimary() (*Expr, error) {
	switch p.tok.kind {
	case tLParen:
		open := p.tok.pos
		if err := p.enter(open); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			if p.tok.kind == tEOF {
				return nil, errAt(open, "missing ')' for '('")
			}
			return nil, p.unexpected("')' for the '(' at position " + fmt.Sprint(open))
		}
		p.depth--
		if err := p.advance(); err != nil {
			return nil, err
		}
		return x, nil
	case tRParen, tEOF:
		return nil, p.unexpected("a comparison")
	}
	left, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tWord {
		if op, ok := relOp(p.text(p.tok)); ok {
			return p.parseComparison(left, op)
		}
	}
	if left.isWord {
		if err := p.count(left.pos); err != nil {
			return nil, err
		}
		return &Expr{Op: OpEq, Pos: left.pos, Name: left.word, NamePos: left.pos,
			Value: odata.Value{Type: odata.EdmBoolean, Bool: true}, ValuePos: left.pos, Bare: true}, nil
	}
	if left.lit.Type == odata.EdmBoolean {
		if err := p.count(left.pos); err != nil {
			return nil, err
		}
		return &Expr{Op: OpConst, Pos: left.pos, Value: left.lit}, nil
	}
	return nil, p.unexpected("a comparison operator after the literal at position " + fmt.Sprint(left.pos))
}

// count checks the comparison limit. Bare properties and constants count as
// comparisons: they are comparisons with true.
func (p *parser) count(pos int) error {
	p.leaves++
	if p.leaves > MaxComparisons {
		return errAt(pos, "more than %d comparisons", MaxComparisons)
	}
	return nil
}

func (p *parser) parseOperand() (operand, error) {
	t := p.tok
	switch t.kind {
	case tLiteral:
		return operand{pos: t.pos, lit: t.val}, p.advance()
	case tWord:
	default:
		return operand{}, p.unexpected("a property or a literal")
	}
	w := p.text(t)
	switch w {
	case "true", "false":
		return operand{pos: t.pos, lit: odata.Value{Type: odata.EdmBoolean, Bool: w == "true"}}, p.advance()
	case "null":
		return operand{}, errAt(t.pos, "null is not supported")
	case "not":
		return operand{}, p.unexpected("a property or a literal")
	}
	if isBinaryWord(w) && w == strings.ToLower(w) {
		return operand{}, p.unexpected("a property or a literal")
	}
	next, err := p.peek()
	if err != nil {
		return operand{}, err
	}
	if next.kind == tLParen {
		return operand{}, errAt(t.pos, "function '%s' is not supported", clip(w))
	}
	return operand{pos: t.pos, word: w, isWord: true}, p.advance()
}

func (p *parser) parseComparison(left operand, op Op) (*Expr, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	right, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	if left.isWord && right.isWord {
		// One side may be a literal spelled as a word (True, NaN, INF).
		lv, lok, err := wordLiteral(left)
		if err != nil {
			return nil, err
		}
		rv, rok, err := wordLiteral(right)
		if err != nil {
			return nil, err
		}
		switch {
		case lok && !rok:
			left = operand{pos: left.pos, lit: lv}
		case rok && !lok:
			right = operand{pos: right.pos, lit: rv}
		case lok && rok:
			return nil, errAt(left.pos, "comparing two literals ('%s' %s '%s') is not supported", clip(left.word), op, clip(right.word))
		default:
			return nil, errAt(left.pos, "comparing property '%s' with property '%s' is not supported", clip(left.word), clip(right.word))
		}
	}
	e := &Expr{Op: op, Pos: left.pos}
	switch {
	case left.isWord && !right.isWord:
		e.Name, e.NamePos, e.Value, e.ValuePos = left.word, left.pos, right.lit, right.pos
	case right.isWord && !left.isWord:
		e.Op = op.Flip()
		e.Name, e.NamePos, e.Value, e.ValuePos = right.word, right.pos, left.lit, left.pos
	default:
		return nil, errAt(left.pos, "comparing two literals is not supported")
	}
	if err := p.count(e.Pos); err != nil {
		return nil, err
	}
	return e, nil
}

// wordLiteral reads a word compared with another word as a literal where
// it can only mean one: true/false/null in any case, NaN, INF, Infinity.
func wordLiteral(o operand) (odata.Value, bool, error) {
	switch strings.ToLower(o.word) {
	case "true":
		return odata.Value{Type: odata.EdmBoolean, Bool: true}, true, nil
	case "false":
		return odata.Value{Type: odata.EdmBoolean}, true, nil
	case "nan":
		return odata.Value{Type: odata.EdmDouble, Float: math.NaN()}, true, nil
	case "inf", "infinity":
		return odata.Value{Type: odata.EdmDouble, Float: math.Inf(1)}, true, nil
	case "null":
		return odata.Value{}, false, errAt(o.pos, "null is not supported")
	}
	return odata.Value{}, false, nil
}
