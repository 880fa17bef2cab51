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
// text ends with "...").
func oneLine(text string, limit int) string {
	text = strings.TrimFunc(text, isPySpace)
	if strings.ContainsAny(text, "\r\n") {
		var b strings.Builder
		runes := []rune(text)
		for i := 0; i < len(runes); {
			if !isPySpace(runes[i]) {
				b.WriteRune(runes[i])
				i++
				continue
			}
			j, lineBreak := i, false
			for j < len(runes) && isPySpace(runes[j]) {
				lineBreak = lineBreak || runes[j] == '\r' || runes[j] == '\n'
				j++
			}
			if lineBreak {
				b.WriteByte(' ')
			} else {
				b.WriteString(string(runes[i:j]))
			}
			i = j
		}
		text = b.String()
	}
	if runes := []rune(text); len(runes) > limit {
		return string(runes[:limit-3]) + "..."
	}
	return text
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
	runes := []rune(s)
	if len(runes) > briefMaxString {
		runes = runes[:briefMaxString]
	}
	out := pyStrRepr(string(runes))
	if len([]rune(out)) <= briefMaxString {
		return out
	}
	i := (briefMaxString - 3) / 2
	j := briefMaxString - 3 - i
	all := []rune(s)
	cut := []rune(pyStrRepr(string(all[:i]) + string(all[len(all)-j:])))
	return string(cut[:i]) + "..." + string(cut[len(cut)-j:])
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
