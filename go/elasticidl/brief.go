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
	chars := codePoints(text)
	isSpace := func(c string) bool { r, _ := decodeWTF8(c); return isPySpace(r) }
	for len(chars) > 0 && isSpace(chars[0]) {
		chars = chars[1:]
	}
	for len(chars) > 0 && isSpace(chars[len(chars)-1]) {
		chars = chars[:len(chars)-1]
	}
	var out []string
	for i := 0; i < len(chars); {
		if !isSpace(chars[i]) {
			out = append(out, chars[i])
			i++
			continue
		}
		j, lineBreak := i, false
		for j < len(chars) && isSpace(chars[j]) {
			lineBreak = lineBreak || chars[j] == "\r" || chars[j] == "\n"
			j++
		}
		if lineBreak {
			out = append(out, " ")
		} else {
			out = append(out, chars[i:j]...)
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
	chars := codePoints(s)
	head := chars
	if len(head) > briefMaxString {
		head = head[:briefMaxString]
	}
	out := pyStrRepr(strings.Join(head, ""))
	if len(codePoints(out)) <= briefMaxString {
		return out
	}
	i := (briefMaxString - 3) / 2
	j := briefMaxString - 3 - i
	cut := codePoints(pyStrRepr(strings.Join(chars[:i], "") + strings.Join(chars[len(chars)-j:], "")))
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
