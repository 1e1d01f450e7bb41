package golden

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/x448/float16"
)

// maxHeaderChars is numpy's limit on a .npy header (numpy.lib.format's
// _MAX_HEADER_SIZE, in characters after decoding): numpy refuses longer
// headers unless the file is trusted, and so do we.
const maxHeaderChars = 10000

// maxNesting bounds the nesting of brackets in a header so that a hostile
// header cannot make the parser recurse deeply.
const maxNesting = 64

// npyMagic is the first six bytes of every .npy image.
const npyMagic = "\x93NUMPY"

// errNotNPY marks a member that does not start with the .npy magic.
var errNotNPY = errors.New("not an .npy array (no \\x93NUMPY magic)")

// dtype is a supported .npy element type.
type dtype struct {
	descr string // as written in the header, e.g. "<f4"
	kind  byte   // 'f', 'i', 'u' or 'b'
	size  int    // bytes per element
	big   bool   // big-endian
}

// npyHeader is a checked .npy header.
type npyHeader struct {
	version int // 1, 2 or 3
	dtype   dtype
	fortran bool
	shape   []int
	count   int64 // elements, the product of shape
	dataOff int64 // offset of the data from the start of the image
}

// dataBytes is the length of the array's data.
func (h *npyHeader) dataBytes() int64 { return h.count * int64(h.dtype.size) }

// readNPYHeader reads and checks the preamble and header of a .npy image
// from r, consuming exactly the bytes before the data. It reads at most
// 12 + 4·maxHeaderChars bytes, whatever the image declares.
func readNPYHeader(r io.Reader) (*npyHeader, error) {
	var pre [8]byte
	if n, err := io.ReadFull(r, pre[:]); err != nil {
		// A short image is an .npy one cut short only when what it holds
		// of the magic (all six bytes, or fewer) matches.
		if m := min(n, len(npyMagic)); m == 0 || string(pre[:m]) != npyMagic[:m] {
			return nil, errNotNPY
		}
		return nil, fmt.Errorf("truncated .npy preamble: %d of 8 bytes", n)
	}
	if string(pre[:6]) != npyMagic {
		return nil, errNotNPY
	}
	h := &npyHeader{version: int(pre[6])}
	if pre[7] != 0 || pre[6] < 1 || pre[6] > 3 {
		return nil, fmt.Errorf(".npy format version %d.%d, want 1.0, 2.0 or 3.0", pre[6], pre[7])
	}
	var hlen int64
	if h.version == 1 {
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("truncated .npy header length: %w", err)
		}
		hlen = int64(binary.LittleEndian.Uint16(b[:]))
		h.dataOff = 10 + hlen
	} else {
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("truncated .npy header length: %w", err)
		}
		hlen = int64(binary.LittleEndian.Uint32(b[:]))
		h.dataOff = 12 + hlen
	}
	// A character takes one byte in latin1 (versions 1 and 2), up to four
	// in utf8 (version 3).
	limit := int64(maxHeaderChars)
	if h.version == 3 {
		limit *= utf8.UTFMax
	}
	if hlen > limit {
		return nil, fmt.Errorf(".npy header of %d bytes is longer than numpy's limit of %d characters", hlen, maxHeaderChars)
	}
	raw := make([]byte, hlen)
	if n, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf(".npy header declares %d bytes, only %d present: %w", hlen, n, err)
	}
	var text []rune
	if h.version == 3 {
		if !utf8.Valid(raw) {
			return nil, errors.New(".npy version 3.0 header is not valid utf8")
		}
		text = []rune(string(raw))
	} else {
		text = make([]rune, len(raw)) // latin1: one byte is one character
		for i, b := range raw {
			text[i] = rune(b)
		}
	}
	if len(text) > maxHeaderChars {
		return nil, fmt.Errorf(".npy header of %d characters is longer than numpy's limit of %d", len(text), maxHeaderChars)
	}
	if err := h.parseDict(text); err != nil {
		return nil, fmt.Errorf(".npy header %s: %w", quoteHeader(text), err)
	}
	return h, nil
}

// quoteHeader quotes a header for a message, shortened when long.
func quoteHeader(text []rune) string {
	s := strings.TrimRight(string(text), " \n")
	if utf8.RuneCountInString(s) > 120 {
		s = string([]rune(s)[:120]) + "..."
	}
	return strconv.Quote(s)
}

// parseDict fills h from the header text, which numpy reads as a Python
// dict literal (ast.literal_eval) with exactly the keys 'descr',
// 'fortran_order' and 'shape' in any order.
func (h *npyHeader) parseDict(text []rune) error {
	p := &pyParser{src: text, longSuffix: h.version <= 2}
	v, err := p.parse()
	if err != nil {
		return err
	}
	if v.kind != pyDict {
		return fmt.Errorf("is a Python %s, want a dict", v.kind)
	}
	got := map[string]*pyValue{}
	for i := range v.items {
		k := v.items[i].key
		if k.kind != pyStr {
			return fmt.Errorf("has a %s key, want only the keys 'descr', 'fortran_order' and 'shape'", k.kind)
		}
		got[k.str] = &v.items[i].val // a repeated key: the last wins, as in Python
	}
	for k := range got {
		if k != "descr" && k != "fortran_order" && k != "shape" {
			return fmt.Errorf("has the key %q, want only the keys 'descr', 'fortran_order' and 'shape'", k)
		}
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if got[k] == nil {
			return fmt.Errorf("has no key %q", k)
		}
	}

	d := got["descr"]
	if d.kind != pyStr {
		return fmt.Errorf("descr is a Python %s; want one of the dtypes float16/32/64, (u)int8..64 or bool", d.kind)
	}
	if h.dtype, err = parseDescr(d.str); err != nil {
		return err
	}

	f := got["fortran_order"]
	if f.kind != pyBool {
		return fmt.Errorf("fortran_order is a Python %s, want True or False", f.kind)
	}
	h.fortran = f.int == 1

	s := got["shape"]
	if s.kind != pyTuple {
		return fmt.Errorf("shape is a Python %s, want a tuple of ints", s.kind)
	}
	h.shape = make([]int, len(s.elems))
	h.count = 1
	for i, e := range s.elems {
		if e.kind != pyInt { // numpy.load fails on a bool dimension too
			return fmt.Errorf("shape dimension %d is a Python %s, want an int", i, e.kind)
		}
		if e.tooBig || e.int < 0 {
			return fmt.Errorf("shape dimension %d is %s, want a non-negative int below 2^63", i, e.text())
		}
		h.shape[i] = int(e.int)
		if e.int != 0 && h.count > math.MaxInt64/e.int {
			return fmt.Errorf("shape %s holds more than 2^63 elements", s.text())
		}
		h.count *= e.int
	}
	if h.count > math.MaxInt64/int64(h.dtype.size) || h.count > math.MaxInt/4 {
		return fmt.Errorf("shape %s of %s is too large to address", s.text(), h.dtype.descr)
	}
	return nil
}

// parseDescr reads a dtype string: a byte order ('<' little, '>' big, '|'
// for one-byte types), a kind and a size.
func parseDescr(s string) (dtype, error) {
	want := "want one of the dtypes float16/32/64, (u)int8..64 or bool in the form <f4"
	t := dtype{descr: s}
	if len(s) != 3 || (s[0] != '<' && s[0] != '>' && s[0] != '|') || s[2] < '1' || s[2] > '8' {
		return t, fmt.Errorf("descr %q is not supported; %s", s, want)
	}
	t.big, t.kind, t.size = s[0] == '>', s[1], int(s[2]-'0')
	ok := false
	switch t.kind {
	case 'f':
		ok = t.size == 2 || t.size == 4 || t.size == 8
	case 'i', 'u':
		ok = t.size == 1 || t.size == 2 || t.size == 4 || t.size == 8
	case 'b':
		ok = t.size == 1
	}
	if !ok || (s[0] == '|' && t.size != 1) {
		return t, fmt.Errorf("descr %q is not supported; %s", s, want)
	}
	return t, nil
}

// decode converts the raw data of len(out) elements of t to float32.
func (t dtype) decode(out []float32, raw []byte) {
	var order binary.ByteOrder = binary.LittleEndian
	if t.big {
		order = binary.BigEndian
	}
	switch k, n := t.kind, t.size; {
	case k == 'f' && n == 4:
		for i := range out {
			out[i] = math.Float32frombits(order.Uint32(raw[4*i:]))
		}
	case k == 'f' && n == 8:
		for i := range out {
			out[i] = float32(math.Float64frombits(order.Uint64(raw[8*i:])))
		}
	case k == 'f':
		for i := range out {
			out[i] = float16.Frombits(order.Uint16(raw[2*i:])).Float32()
		}
	case k == 'b' || (k == 'u' && n == 1):
		for i := range out {
			out[i] = float32(raw[i])
			if k == 'b' && raw[i] != 0 {
				out[i] = 1
			}
		}
	case k == 'i' && n == 1:
		for i := range out {
			out[i] = float32(int8(raw[i]))
		}
	case k == 'i' && n == 2:
		for i := range out {
			out[i] = float32(int16(order.Uint16(raw[2*i:])))
		}
	case k == 'i' && n == 4:
		for i := range out {
			out[i] = float32(int32(order.Uint32(raw[4*i:])))
		}
	case k == 'i':
		for i := range out {
			out[i] = float32(int64(order.Uint64(raw[8*i:])))
		}
	case n == 2:
		for i := range out {
			out[i] = float32(order.Uint16(raw[2*i:]))
		}
	case n == 4:
		for i := range out {
			out[i] = float32(order.Uint32(raw[4*i:]))
		}
	default:
		for i := range out {
			out[i] = float32(order.Uint64(raw[8*i:]))
		}
	}
}

// pyKind is the type of a Python literal.
type pyKind int

const (
	pyStr pyKind = iota
	pyBytes
	pyInt
	pyFloat
	pyBool
	pyNone
	pyTuple
	pyList
	pySet
	pyDict
)

func (k pyKind) String() string {
	return [...]string{"str", "bytes", "int", "float", "bool", "None", "tuple", "list", "set", "dict"}[k]
}

// pyValue is a Python literal: the subset of ast.literal_eval a .npy
// header can use (no complex numbers, no arithmetic).
type pyValue struct {
	kind   pyKind
	str    string // pyStr, pyBytes; pyFloat: the literal
	int    int64  // pyInt (when !tooBig), pyBool (0 or 1)
	tooBig bool   // pyInt beyond int64
	lit    string // pyInt: the literal as written, for messages
	elems  []pyValue
	items  []pyItem
}

type pyItem struct{ key, val pyValue }

// text renders v for messages.
func (v *pyValue) text() string {
	switch v.kind {
	case pyStr:
		return strconv.Quote(v.str)
	case pyInt:
		return v.lit
	case pyFloat:
		return v.str
	case pyBool:
		return [...]string{"False", "True"}[v.int]
	case pyNone:
		return "None"
	case pyTuple:
		parts := make([]string, len(v.elems))
		for i := range v.elems {
			parts[i] = v.elems[i].text()
		}
		if len(parts) == 1 {
			return "(" + parts[0] + ",)"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return v.kind.String()
}

// pyParser parses one Python literal expression.
type pyParser struct {
	src        []rune
	pos        int
	depth      int
	longSuffix bool // numpy drops an L after a number in version 1 and 2 headers
}

func (p *pyParser) errorf(format string, args ...any) error {
	return fmt.Errorf("is not a Python literal at character %d: "+format, append([]any{p.pos}, args...)...)
}

// parse reads the whole text as one expression.
func (p *pyParser) parse() (pyValue, error) {
	for i, c := range p.src {
		if c == 0 {
			p.pos = i
			return pyValue{}, p.errorf("a NUL character")
		}
	}
	// ast.literal_eval strips leading spaces and tabs.
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
	skipped := p.pos
	p.space()
	if err := p.indented(skipped, p.pos); err != nil {
		return pyValue{}, err
	}
	v, err := p.value()
	if err != nil {
		return v, err
	}
	end := p.pos
	p.space()
	if p.pos < len(p.src) {
		return v, p.errorf("unexpected %q after the literal", p.src[p.pos])
	}
	// Python's tokenizer refuses an indented last line without a newline
	// after the expression's line ("unexpected indent"); numpy passes
	// version 1 and 2 headers through tokenize.untokenize first, which
	// drops such a line.
	last := len(p.src)
	for last > end && p.src[last-1] != '\n' && p.src[last-1] != '\r' {
		last--
	}
	if !p.longSuffix && last > end && !slices.Contains(p.src[last:], '#') {
		if err := p.indented(last, len(p.src)); err != nil {
			return v, err
		}
	}
	return v, nil
}

// indented refuses the token at pos when the line it is on is indented;
// from is where the line starts, or later when leading blanks were
// stripped.
func (p *pyParser) indented(from, pos int) error {
	for i := pos; i > from; i-- {
		if c := p.src[i-1]; c == '\n' || c == '\r' {
			from = i
			break
		}
	}
	col := 0
	for _, c := range p.src[from:pos] {
		switch c {
		case ' ':
			col++
		case '\t':
			col = (col/8 + 1) * 8
		case '\f':
			col = 0
		}
	}
	if col > 0 {
		p.pos = pos
		return p.errorf("unexpected indent (column %d)", col)
	}
	return nil
}

// space skips whitespace, comments and line continuations.
func (p *pyParser) space() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		case c == '\\' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '\n':
			p.pos += 2
		default:
			return
		}
	}
}

func (p *pyParser) peek() rune {
	p.space()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *pyParser) value() (pyValue, error) {
	c := p.peek()
	switch {
	case c == 0:
		return pyValue{}, p.errorf("unexpected end")
	case c == '{' || c == '(' || c == '[':
		return p.container(c)
	case c == '-' || c == '+':
		p.pos++
		if n := p.peek(); !(n >= '0' && n <= '9') && n != '.' {
			return pyValue{}, p.errorf("%q must be followed by a number", c)
		}
		v, err := p.number()
		if err == nil && c == '-' {
			v.lit = "-" + v.lit
			if v.kind == pyInt && !v.tooBig {
				v.int = -v.int
			} else if v.kind == pyFloat {
				v.str = "-" + v.str
			}
		}
		return v, err
	case (c >= '0' && c <= '9') || (c == '.' && p.pos+1 < len(p.src) && p.src[p.pos+1] >= '0' && p.src[p.pos+1] <= '9'):
		return p.number()
	case c == '\'' || c == '"':
		return p.strings()
	case c == '_' || unicodeLetter(c):
		start := p.pos
		for p.pos < len(p.src) && (p.src[p.pos] == '_' || unicodeLetter(p.src[p.pos]) || (p.src[p.pos] >= '0' && p.src[p.pos] <= '9')) {
			p.pos++
		}
		name := string(p.src[start:p.pos])
		if p.pos < len(p.src) && (p.src[p.pos] == '\'' || p.src[p.pos] == '"') && isStringPrefix(name) {
			p.pos = start
			return p.strings()
		}
		switch name {
		case "True":
			return pyValue{kind: pyBool, int: 1}, nil
		case "False":
			return pyValue{kind: pyBool}, nil
		case "None":
			return pyValue{kind: pyNone}, nil
		}
		p.pos = start
		return pyValue{}, p.errorf("the name %q is not a literal", name)
	}
	return pyValue{}, p.errorf("unexpected %q", c)
}

func unicodeLetter(c rune) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func isStringPrefix(s string) bool {
	switch strings.ToLower(s) {
	case "r", "u", "b", "br", "rb":
		return true
	}
	return false
}

// container reads a dict, set, tuple, list or parenthesised expression.
func (p *pyParser) container(open rune) (pyValue, error) {
	if p.depth++; p.depth > maxNesting {
		return pyValue{}, p.errorf("brackets nested deeper than %d", maxNesting)
	}
	defer func() { p.depth-- }()
	close := map[rune]rune{'{': '}', '(': ')', '[': ']'}[open]
	p.pos++
	v := pyValue{kind: map[rune]pyKind{'{': pyDict, '(': pyTuple, '[': pyList}[open]}
	commas := 0
	for {
		if p.peek() == close {
			p.pos++
			break
		}
		e, err := p.value()
		if err != nil {
			return v, err
		}
		if open == '{' {
			if len(v.elems)+len(v.items) == 0 && p.peek() != ':' {
				v.kind = pySet
			}
			if v.kind == pyDict {
				if p.peek() != ':' {
					return v, p.errorf("want ':' after a dict key")
				}
				p.pos++
				val, err := p.value()
				if err != nil {
					return v, err
				}
				v.items = append(v.items, pyItem{e, val})
			} else {
				v.elems = append(v.elems, e)
			}
		} else {
			v.elems = append(v.elems, e)
		}
		switch p.peek() {
		case ',':
			p.pos++
			commas++
		case close:
		default:
			return v, p.errorf("want ',' or %q", close)
		}
	}
	if open == '(' && len(v.elems) == 1 && commas == 0 {
		return v.elems[0], nil // (x) is x, not a tuple
	}
	return v, nil
}

const (
	digits   = `(?:[0-9](?:_?[0-9])*)`
	exponent = `(?:[eE][+-]?` + digits + `)`
)

var (
	intLiteral   = regexp.MustCompile(`^(?:0(?:_?0)*|[1-9](?:_?[0-9])*|0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+)$`)
	floatLiteral = regexp.MustCompile(`^(?:` + digits + `?\.` + digits + exponent + `?|` + digits + `\.` + exponent + `?|` + digits + exponent + `)$`)
)

// number reads an int or float literal (a complex one is refused).
func (p *pyParser) number() (pyValue, error) {
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if (c >= '0' && c <= '9') || unicodeLetter(c) || c == '_' || c == '.' {
			p.pos++
		} else if (c == '+' || c == '-') && (p.src[p.pos-1] == 'e' || p.src[p.pos-1] == 'E') &&
			!strings.ContainsAny(string(p.src[start:p.pos]), "xXbBoO") {
			p.pos++
		} else {
			break
		}
	}
	lit := string(p.src[start:p.pos])
	if p.longSuffix {
		save := p.pos
		if p.peek() == 'L' && (p.pos+1 >= len(p.src) || !(unicodeLetter(p.src[p.pos+1]) || p.src[p.pos+1] == '_' || (p.src[p.pos+1] >= '0' && p.src[p.pos+1] <= '9'))) {
			p.pos++
		} else if strings.HasSuffix(lit, "L") && intLiteral.MatchString(lit[:len(lit)-1]) {
			lit = lit[:len(lit)-1]
		} else {
			p.pos = save
		}
	}
	if intLiteral.MatchString(lit) {
		digits, base := strings.ReplaceAll(lit, "_", ""), 10
		if len(digits) > 1 && digits[0] == '0' && digits[1] != '0' {
			base = map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[digits[1]]
			digits = digits[2:]
		}
		v := pyValue{kind: pyInt, lit: lit}
		n, err := strconv.ParseInt(digits, base, 64)
		if err != nil {
			v.tooBig = true
		}
		v.int = n
		return v, nil
	}
	if floatLiteral.MatchString(lit) {
		return pyValue{kind: pyFloat, str: lit}, nil
	}
	p.pos = start
	return pyValue{}, p.errorf("%q is not a Python int or float literal", lit)
}

// strings reads one or more adjacent string literals, which Python joins.
func (p *pyParser) strings() (pyValue, error) {
	var v pyValue
	for n := 0; ; n++ {
		p.space()
		start := p.pos
		for p.pos < len(p.src) && unicodeLetter(p.src[p.pos]) {
			p.pos++
		}
		prefix := strings.ToLower(string(p.src[start:p.pos]))
		if p.pos >= len(p.src) || (p.src[p.pos] != '\'' && p.src[p.pos] != '"') || (prefix != "" && !isStringPrefix(prefix)) {
			p.pos = start
			if n == 0 {
				return v, p.errorf("want a string")
			}
			return v, nil
		}
		s, err := p.quoted(strings.Contains(prefix, "r"))
		if err != nil {
			return v, err
		}
		kind := pyStr
		if strings.Contains(prefix, "b") {
			kind = pyBytes
		}
		if n > 0 && kind != v.kind {
			return v, p.errorf("cannot join bytes and str literals")
		}
		v.kind = kind
		v.str += s
	}
}

// quoted reads a quoted string body at p.pos (a quote).
func (p *pyParser) quoted(raw bool) (string, error) {
	q := p.src[p.pos]
	triple := p.pos+2 < len(p.src) && p.src[p.pos+1] == q && p.src[p.pos+2] == q
	if triple {
		p.pos += 3
	} else {
		p.pos++
	}
	var b strings.Builder
	for {
		if p.pos >= len(p.src) {
			return "", p.errorf("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == q && (!triple || (p.pos+2 < len(p.src) && p.src[p.pos+1] == q && p.src[p.pos+2] == q)):
			if triple {
				p.pos += 3
			} else {
				p.pos++
			}
			return b.String(), nil
		case (c == '\n' || c == '\r') && !triple:
			return "", p.errorf("newline in a string")
		case c == '\\':
			if p.pos+1 >= len(p.src) {
				return "", p.errorf("unterminated string")
			}
			if raw {
				b.WriteRune(c)
				b.WriteRune(p.src[p.pos+1])
				p.pos += 2
				continue
			}
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteRune(c)
			p.pos++
		}
	}
}

// escape decodes the escape sequence at p.pos (a backslash).
func (p *pyParser) escape(b *strings.Builder) error {
	e := p.src[p.pos+1]
	p.pos += 2
	simple := map[rune]string{'\\': "\\", '\'': "'", '"': "\"", 'n': "\n", 'r': "\r", 't': "\t", 'a': "\a",
		'b': "\b", 'f': "\f", 'v': "\v", '\n': ""}
	if s, ok := simple[e]; ok {
		b.WriteString(s)
		return nil
	}
	hex := map[rune]int{'x': 2, 'u': 4, 'U': 8}
	if n, ok := hex[e]; ok {
		if p.pos+n > len(p.src) {
			return p.errorf("truncated \\%c escape", e)
		}
		r, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil || r > utf8.MaxRune {
			return p.errorf("bad \\%c escape", e)
		}
		p.pos += n
		b.WriteRune(rune(r))
		return nil
	}
	if e >= '0' && e <= '7' {
		r := e - '0'
		for i := 0; i < 2 && p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '7'; i++ {
			r = r*8 + p.src[p.pos] - '0'
			p.pos++
		}
		b.WriteRune(r)
		return nil
	}
	if e == 'N' {
		return p.errorf("\\N{...} escapes are not supported")
	}
	b.WriteRune('\\') // Python keeps an unknown escape as it is
	b.WriteRune(e)
	return nil
}
