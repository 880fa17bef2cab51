package elasticidl

import (
	"fmt"
	"strings"
)

// spacedMinus finds a '-' that whitespace or a comment separates from what follows, outside
// string literals and comments, as a 1-based line and rune column. protobuf Python's
// tokenizer reads such a '-' as a token of its own and refuses it ("Couldn't parse
// integer: -"); protobuf-go (v1.34) reads "- 5" as -5. The reference is Python, so the
// Go decode refuses it too.
func spacedMinus(text string) (line, col int, found bool) {
	line, col = 1, 0
	var quote rune
	escaped, comment := false, false
	runes := []rune(text)
	for i, r := range runes {
		col++
		switch {
		case r == '\n':
			line, col, comment, quote = line+1, 0, false, 0
		case comment:
		case quote != 0:
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == quote:
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#':
			comment = true
		case r == '-' && i+1 < len(runes) && (isPySpace(runes[i+1]) || runes[i+1] == '#'):
			return line, col, true
		}
	}
	return 0, 0, false
}

// checkSpacedMinus is the *DecodeError for a spaced '-' (spacedMinus), naming the field before it.
func checkSpacedMinus(text string) error {
	line, col, found := spacedMinus(text)
	if !found {
		return nil
	}
	where := fmt.Sprintf("(line %d:%d)", line, col)
	return &DecodeError{
		Field:  textprotoField(text, where),
		Reason: "bad textproto: " + strings.TrimSpace(where+" a '-' must be followed by its number, without a space"),
		Format: string(FormatTextproto),
	}
}
