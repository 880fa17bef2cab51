package elasticidl

// Reading textproto as protobuf Python's text_format reads it.

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// pyLineBreaks are the line boundaries of Python's str.splitlines().
const pyLineBreaks = "\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029"

func decodeTextproto(text string, taskTypeVersion int32) (*Task, error) {
	header, hasHeader := "", false
	if strings.TrimFunc(text, isPySpace) != "" {
		first := strings.TrimLeftFunc(text, isPySpace)
		if i := strings.IndexAny(first, pyLineBreaks); i >= 0 {
			first = first[:i]
		}
		if strings.HasPrefix(first, strings.TrimSpace(textprotoHeader)) {
			header = strings.TrimFunc(strings.SplitN(first, ":", 2)[1], isPySpace)
			hasHeader = true
		}
	}
	msg, err := newMessage(taskTypeVersion)
	if err != nil {
		return nil, err
	}
	if want := string(msg.ProtoReflect().Descriptor().FullName()); hasHeader && header != want {
		for v := int32(0); v <= TaskTypeVersionKubeflow; v++ {
			other, _ := newMessage(v)
			if string(other.ProtoReflect().Descriptor().FullName()) == header {
				return nil, &DecodeError{
					Reason: fmt.Sprintf("header names %s (task_type_version %d) but task_type_version %d was requested",
						header, v, taskTypeVersion),
					Format: string(FormatTextproto),
				}
			}
		}
		return nil, &DecodeError{
			Reason: fmt.Sprintf("header names %q, which is not a task message of this schema", header),
			Format: string(FormatTextproto),
		}
	}
	parsed := pyStringEscapes(pySpaces(text))
	if err := prototext.Unmarshal([]byte(parsed), msg); err != nil {
		field := textprotoField(text, err.Error())
		return nil, &DecodeError{
			Field:  field,
			Reason: "bad textproto: " + err.Error() + textprotoHint(msg.ProtoReflect().Descriptor(), parsed, err.Error(), field),
			Format: string(FormatTextproto),
			Err:    err,
		}
	}
	if line, col := detachedMinus(text); line > 0 {
		// protobuf-go reads "- 5" as -5; protobuf Python reads "-" as a number and fails.
		return nil, &DecodeError{
			Field:  lastFieldName([]rune(strings.Split(text, "\n")[line-1])[:col]),
			Reason: fmt.Sprintf("bad textproto: (line %d:%d): couldn't parse integer: -", line, col+1),
			Format: string(FormatTextproto),
		}
	}
	return taskOf(msg), nil
}

// pySpaces writes the whitespace protobuf Python skips between tokens and
// protobuf-go does not (\v, \f, Unicode spaces) as ASCII spaces of the same
// length in bytes, outside strings and comments.
func pySpaces(text string) string {
	var b []byte // nil until a change
	var quote rune
	comment := false
	for i, c := range text {
		switch {
		case c == '\n':
			quote, comment = 0, false
		case comment:
		case quote != 0:
			if c == quote && !escapedAt(text, i) {
				quote = 0
			}
		case c == '#':
			comment = true
		case c == '"' || c == '\'':
			quote = c
		case c != ' ' && c != '\t' && c != '\r' && isPySpace(c):
			if b == nil {
				b = []byte(text)
			}
			for j := 0; j < utf8.RuneLen(c); j++ {
				b[i+j] = ' '
			}
		}
	}
	if b == nil {
		return text
	}
	return string(b)
}

// escapedAt says whether the byte at i follows an odd run of backslashes.
func escapedAt(text string, i int) bool {
	n := 0
	for i > 0 && text[i-1] == '\\' {
		n, i = n+1, i-1
	}
	return n%2 == 1
}

// detachedMinus is the line (1-based) and rune column (0-based) of the first
// '-' that starts a token and is followed by a space or a comment, outside
// strings and comments; 0, 0 when there is none.
func detachedMinus(text string) (int, int) {
	line, col := 1, 0
	var quote rune
	prev := ' '
	comment, escaped := false, false
	runes := []rune(text)
	for i, c := range runes {
		switch {
		case c == '\n':
			line, col, quote, comment, escaped, prev = line+1, 0, 0, false, false, c
			continue
		case comment:
		case quote != 0:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == quote:
				quote = 0
			}
		case c == '#':
			comment = true
		case c == '"' || c == '\'':
			quote = c
		case c == '-' && strings.ContainsRune(" \t\r\f\v:[,{<", prev) && i+1 < len(runes) &&
			strings.ContainsRune(" \t\r\f\v\n#", runes[i+1]):
			return line, col
		}
		prev = c
		col++
	}
	return 0, 0
}

// pyStringEscapes rewrites the escapes of string literals that protobuf Python
// reads differently from protobuf-go: it keeps an unknown escape (\q, \?) as a
// backslash and the character, and refuses a UTF-16 surrogate (\ud800), which
// protobuf-go pairs up. (\N{name} is Python's alone; protobuf-go refuses it.)
func pyStringEscapes(text string) string {
	if !strings.Contains(text, "\\") {
		return text
	}
	var b strings.Builder
	var quote byte // inside a string literal: its quote
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote == 0 && c == '#':
			end := strings.IndexByte(text[i:], '\n')
			if end < 0 {
				end = len(text) - i
			}
			b.WriteString(text[i : i+end])
			i += end - 1
			continue
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote != 0 && (c == quote || c == '\n'):
			quote = 0
		case quote != 0 && c == '\\' && i+1 < len(text):
			next := text[i+1]
			switch {
			case strings.IndexByte("abfnrtv\\'\"xUN01234567\n", next) >= 0:
			case next == 'u' && i+6 <= len(text):
				if r, ok := hexVal(text[i+2 : i+6]); ok && r >= 0xD800 && r <= 0xDFFF {
					for _, x := range appendWTF8(nil, r) {
						fmt.Fprintf(&b, "\\x%02x", x)
					}
					i += 5
					continue
				}
			case next != 'u':
				b.WriteString("\\\\") // Python keeps the backslash
				continue
			}
			b.WriteByte(c)
			b.WriteByte(next)
			i++
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

var (
	textNamedField = regexp.MustCompile(`(?:unknown field: |non-repeated field ")([\w.]+)`)
	// protobuf Python's identifier token: "elastic_co.fig" is the field elastic_co, then a stray ".".
	textInvalidName = regexp.MustCompile(`invalid field name: ([A-Za-z_][0-9A-Za-z_+-]*)`)
	textPosition    = regexp.MustCompile(`\(line (\d+):(\d+)\)`)
)

// textprotoField is the field a textproto error points at, found as the
// reference finds it in protobuf Python's messages: the field the message names,
// else the last "name:" or "name {" on the error's line before its column. Where
// protobuf-go reports another position than protobuf Python (the end of the
// input, a string it cannot decode), the position is moved to Python's.
func textprotoField(text, errText string) string {
	if m := textNamedField.FindStringSubmatch(errText); m != nil {
		return m[1]
	}
	if m := textInvalidName.FindStringSubmatch(errText); m != nil {
		return m[1]
	}
	lines := strings.Split(text, "\n")
	var line, col int
	if m := textPosition.FindStringSubmatch(errText); m != nil {
		fmt.Sscan(m[1], &line)
		fmt.Sscan(m[2], &col)
		if strings.Contains(errText, "invalid UTF-8") {
			line, col = afterStrings(lines, line, col)
		}
	} else if strings.Contains(errText, "unexpected EOF") {
		line, col = lastToken(lines)
	}
	if line < 1 || line > len(lines) {
		return ""
	}
	l := []rune(lines[line-1])
	if col > len(l) {
		col = len(l)
	}
	if col < 0 {
		col = 0
	}
	return lastFieldName(l[:col])
}

// lastFieldName is the name of the last "name:" or "name {" in l (a name is
// letters, digits and '_'; spaces may come before the ':' or '{'), or "".
// Found from the end, so that a long line costs one pass.
func lastFieldName(l []rune) string {
	isName := func(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }
	isSpace := func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' }
	for i := len(l) - 1; i >= 0; i-- {
		if l[i] != ':' && l[i] != '{' {
			continue
		}
		end := i
		for end > 0 && isSpace(l[end-1]) {
			end--
		}
		start := end
		for start > 0 && isName(l[start-1]) {
			start--
		}
		if start < end {
			return string(l[start:end])
		}
	}
	return ""
}

// lastToken is the line of the input's last token and the column just into it
// (1-based, in runes), where protobuf Python reports an unexpected end of input.
func lastToken(lines []string) (int, int) {
	line, col := 0, 0
	for i, text := range lines {
		r := []rune(text)
		for j := 0; j < len(r); {
			switch c := r[j]; {
			case isPySpace(c):
				j++
				continue
			case c == '#':
				j = len(r)
				continue
			case c == '"' || c == '\'':
				line, col = i+1, j+1
				for j++; j < len(r) && r[j] != c; j++ {
					if r[j] == '\\' {
						j++
					}
				}
				j++
			case unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("_.-+", c):
				line, col = i+1, j+1
				for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || strings.ContainsRune("_.-+", r[j])) {
					j++
				}
			default:
				line, col = i+1, j+1
				j++
			}
		}
	}
	return line, col
}

// afterStrings moves from a string token (1-based line and column, in runes) past
// it and the string tokens that continue it to the next token: where protobuf
// Python reports a string it cannot decode.
func afterStrings(lines []string, line, col int) (int, int) {
	i, j := line-1, col-1
	var r []rune // lines[i] as runes, converted once per line
	if i >= 0 && i < len(lines) {
		r = []rune(lines[i])
	}
	for i < len(lines) {
		for j < len(r) && isPySpace(r[j]) {
			j++
		}
		switch {
		case j >= len(r) || r[j] == '#':
			i, j = i+1, 0
			r = nil
			if i < len(lines) {
				r = []rune(lines[i])
			}
			continue
		case r[j] == '"' || r[j] == '\'':
			quote := r[j]
			for j++; j < len(r) && r[j] != quote; j++ {
				if r[j] == '\\' {
					j++
				}
			}
			j++
			continue
		}
		return i + 1, j + 1
	}
	return lastToken(lines)
}

var (
	textUnknownField = regexp.MustCompile(`unknown field: (\w+)`)
	// protobuf-go reads "core-complex" as no value at all; protobuf Python as an unknown enum name.
	textBadEnum = regexp.MustCompile(`(?:invalid value for enum type|invalid scalar value): (\S+)`)
)

// textprotoHint is what the reference adds to protobuf's error: for an unknown field, the
// other task shape's hint or a "did you mean"; for an enum value, the name it writes (a
// short name, which textproto does not take) or the one it looks like a typo of. parsed is
// the text prototext read; field the field the error points at.
func textprotoHint(root protoreflect.MessageDescriptor, parsed, errText, field string) string {
	m := textPosition.FindStringSubmatch(errText)
	if m == nil {
		return ""
	}
	var line, col int
	fmt.Sscan(m[1], &line)
	fmt.Sscan(m[2], &col)
	desc := enclosingMessage(root, parsed, offsetOf(parsed, line, col))
	if desc == nil {
		return ""
	}
	if u := textUnknownField.FindStringSubmatch(errText); u != nil {
		if hint := otherShapeHint(desc, u[1]); hint != "" {
			return hint
		}
		names := make([]string, desc.Fields().Len())
		for i := range names {
			names[i] = string(desc.Fields().Get(i).Name())
		}
		return didYouMean(u[1], names) // textproto takes the proto names only
	}
	e := textBadEnum.FindStringSubmatch(errText)
	fd := desc.Fields().ByName(protoreflect.Name(field))
	if e == nil || fd == nil || fd.Enum() == nil {
		return ""
	}
	if name, ok := enumValueName(fd.Enum(), e[1]); ok {
		return fmt.Sprintf("; did you mean %s? (textproto takes the names protobuf defines; YAML and JSON also take %s)",
			pyStrRepr(name), pyStrRepr(e[1]))
	}
	if match := enumSuggestion(fd.Enum(), e[1]); match != "" {
		return fmt.Sprintf("; did you mean %s?", pyStrRepr(match))
	}
	return ""
}

// offsetOf is the byte offset of a 1-based line and rune column (prototext's positions).
func offsetOf(text string, line, col int) int {
	i := 0
	for l := 1; l < line; l++ {
		next := strings.IndexByte(text[i:], '\n')
		if next < 0 {
			return len(text)
		}
		i += next + 1
	}
	for c := 1; c < col && i < len(text); c++ {
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return i
}

// enclosingMessage is the message type the text at byte offset end is in: the message
// fields opened before it and not yet closed, followed from root; nil when they are no
// fields of the schema. The text before end is what prototext read without an error.
func enclosingMessage(root protoreflect.MessageDescriptor, text string, end int) protoreflect.MessageDescriptor {
	type frame struct {
		desc protoreflect.MessageDescriptor
		list protoreflect.FieldDescriptor // inside "name: [": the repeated message field
	}
	stack := []frame{{desc: root}}
	var field protoreflect.FieldDescriptor // the field named last, until its value
	afterColon := false
	for i := 0; i < end && i < len(text); {
		top := &stack[len(stack)-1]
		c := text[i]
		switch {
		case c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			continue
		case c == '"' || c == '\'':
			for i++; i < len(text) && text[i] != c && text[i] != '\n'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
			i++
			field, afterColon = nil, false
			continue
		case c == '{' || c == '<':
			target := field
			if top.list != nil && !afterColon {
				target = top.list
			}
			if target == nil || target.Message() == nil {
				return nil
			}
			stack = append(stack, frame{desc: target.Message()})
			field, afterColon = nil, false
		case c == '}' || c == '>':
			if len(stack) == 1 {
				return nil
			}
			stack = stack[:len(stack)-1]
		case c == '[':
			if field != nil { // "name: [" or, for a message field, "name ["
				top.list = field
			}
			field, afterColon = nil, false
		case c == ']':
			top.list = nil
		case c == ':':
			afterColon = true
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			start := i
			for i < len(text) && (text[i] == '_' || text[i] >= '0' && text[i] <= '9' ||
				text[i] >= 'A' && text[i] <= 'Z' || text[i] >= 'a' && text[i] <= 'z') {
				i++
			}
			if afterColon || top.list != nil { // a value (an enum name, true): not a field name
				field, afterColon = nil, false
			} else {
				field = top.desc.Fields().ByName(protoreflect.Name(text[start:i]))
			}
			continue
		case c > ' ' && c != ',' && c != ';': // a number, a sign: a value
			if afterColon {
				field, afterColon = nil, false
			}
		}
		i++
	}
	return stack[len(stack)-1].desc
}
