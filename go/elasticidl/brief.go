package elasticidl

// Bounded messages, as the reference's elastic_idl/_errors.py writes them: a
// value quoted in a message is cut (brief, Python's reprlib with the limits of
// tables_gen.go), and every message is one line of at most maxErrorChars
// characters (oneLine), whatever the input. Messages are prose, not contract;
// a DecodeError's field is contract, and is cut the same way to maxFieldChars.

import (
	"strconv"
	"strings"
	"unicode"
)

// oneLine is the reference's one_line: text stripped, every run of whitespace
// that holds a line break made one space, then at most limit characters (a cut
// text ends with "..."). Characters are code points, a lone surrogate included.
func oneLine(text string, limit int) string {
	// One pass, stopped once the text is known to be cut: a field or a reason may quote a megabyte.
	space := func(i int) (bool, int, bool) { // is text[i:] a space, its size, is it a line break
		r, size := decodeWTF8(text[i:])
		return isPySpace(r), size, r == '\r' || r == '\n'
	}
	i := 0
	for i < len(text) {
		isSpace, size, _ := space(i)
		if !isSpace {
			break
		}
		i += size
	}
	out := make([]string, 0, min(limit+1, len(text)))
	for i < len(text) && len(out) <= limit {
		if isSpace, size, _ := space(i); !isSpace {
			out = append(out, text[i:i+size])
			i += size
			continue
		}
		j, lineBreak := i, false
		for j < len(text) {
			isSpace, size, isBreak := space(j)
			if !isSpace {
				break
			}
			lineBreak = lineBreak || isBreak
			j += size
		}
		if j == len(text) { // trailing whitespace is stripped
			break
		}
		if lineBreak {
			out = append(out, " ")
		} else {
			for k := i; k < j && len(out) <= limit; {
				_, size, _ := space(k)
				out = append(out, text[k:k+size])
				k += size
			}
		}
		i = j
	}
	if len(out) > limit {
		return strings.Join(out[:limit-3], "") + "..."
	}
	return strings.Join(out, "")
}

// codePoints splits s into its code points (WTF-8: a lone surrogate is one).
func codePoints(s string) []string {
	out := make([]string, 0, len(s))
	for i := 0; i < len(s); {
		_, size := decodeWTF8(s[i:])
		out = append(out, s[i:i+size])
		i += size
	}
	return out
}

// pyStrRepr is Python's repr() of a str: single quotes unless the text holds a
// single quote and no double quote; backslash escapes for what is not printable.
// A lone surrogate (WTF-8, as the JSON reader keeps it) is written \udxxx.
func pyStrRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := decodeWTF8(s[i:])
		i += size
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == ' ' || (r > ' ' && r < 0x7f):
			b.WriteRune(r)
		case r < 0x100 && (r < 0xa0 || r == 0xad):
			b.WriteString(`\x` + hex2(int(r)))
		case r >= 0xD800 && r <= 0xDFFF, !unicode.IsPrint(r):
			switch {
			case r < 0x100:
				b.WriteString(`\x` + hex2(int(r)))
			case r < 0x10000:
				b.WriteString(`\u` + leftPad(strconv.FormatInt(int64(r), 16), 4))
			default:
				b.WriteString(`\U` + leftPad(strconv.FormatInt(int64(r), 16), 8))
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

func hex2(n int) string { return leftPad(strconv.FormatInt(int64(n), 16), 2) }

func leftPad(s string, n int) string {
	if len(s) < n {
		return strings.Repeat("0", n-len(s)) + s
	}
	return s
}

// brief is the reference's brief() of a str: its repr, cut in the middle to
// briefMaxString characters (reprlib's rule).
func brief(s string) string {
	n := 0 // code points, counted without a copy: s may be a megabyte
	for i := 0; i < len(s); n++ {
		_, size := decodeWTF8(s[i:])
		i += size
	}
	offset := func(k int) int { // the byte offset of code point k
		i := 0
		for ; k > 0; k-- {
			_, size := decodeWTF8(s[i:])
			i += size
		}
		return i
	}
	head := s
	if n > briefMaxString {
		head = s[:offset(briefMaxString)]
	}
	out := pyStrRepr(head)
	if len(codePoints(out)) <= briefMaxString {
		return out
	}
	i := (briefMaxString - 3) / 2
	j := briefMaxString - 3 - i
	cut := codePoints(pyStrRepr(s[:offset(i)] + s[offset(n-j):]))
	return strings.Join(cut[:i], "") + "..." + strings.Join(cut[len(cut)-j:], "")
}

// briefInt is brief() of an int: its digits, cut in the middle to briefMaxLong.
func briefInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) > briefMaxLong {
		i := (briefMaxLong - 3) / 2
		j := briefMaxLong - 3 - i
		s = s[:i] + "..." + s[len(s)-j:]
	}
	return s
}

// briefList is brief() of a list whose items are written by item: at most
// briefMaxList of them, then "...".
func briefList[T any](items []T, item func(T) string) string {
	var parts []string
	for i, x := range items {
		if i == briefMaxList {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, item(x))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
