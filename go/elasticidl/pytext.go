package elasticidl

// Python's rules for text: whitespace, Unicode digits, int(), re, repr().

import (
	"math/big"
	"regexp"
	"strings"
	"unicode"
)

func isPySpace(r rune) bool {
	for _, w := range pyWhitespace {
		if r == w {
			return true
		}
	}
	return false
}

// digitValue is the value of a Unicode decimal digit (category Nd), which Python's
// int() accepts. Nd digits come in runs of ten from 0 to 9.
func digitValue(r rune) (int, bool) {
	if r >= '0' && r <= '9' {
		return int(r - '0'), true
	}
	if !unicode.Is(unicode.Nd, r) {
		return 0, false
	}
	start := r
	for unicode.Is(unicode.Nd, start-1) {
		start--
	}
	return int(r-start) % 10, true
}

// pyParseInt reads a string as Python's int(s): surrounding whitespace, a sign,
// decimal digits (any script) with single underscores between them.
func pyParseInt(s string) (*big.Int, bool) {
	s = strings.TrimFunc(s, isPySpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return nil, false
	}
	var digits strings.Builder
	prevDigit := false
	for _, r := range s {
		if r == '_' {
			if !prevDigit {
				return nil, false
			}
			prevDigit = false
			continue
		}
		d, ok := digitValue(r)
		if !ok || digits.Len() == pyMaxStrDigits { // Python's int() refuses more digits
			return nil, false
		}
		digits.WriteByte(byte('0' + d))
		prevDigit = true
	}
	if !prevDigit {
		return nil, false
	}
	n, ok := new(big.Int).SetString(digits.String(), 10)
	if ok && neg {
		n.Neg(n)
	}
	return n, ok
}

// pyRegexp compiles a pattern of the reference: \d is any decimal digit and a
// final $ also matches before a trailing newline, as in Python's re.
func pyRegexp(pattern string) *regexp.Regexp {
	p := strings.ReplaceAll(pattern, `\d`, `\p{Nd}`)
	if strings.HasSuffix(p, "$") {
		p = strings.TrimSuffix(p, "$") + `\n?$`
	}
	return regexp.MustCompile(p)
}

// pyRepr is a short repr of a value for messages (prose only).
func pyRepr(v jsonValue) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case jsonNumber:
		return x.lit
	case string:
		return brief(x)
	case []jsonValue:
		return "[...]"
	}
	return "{...}"
}
