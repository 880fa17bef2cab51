package elasticidl

// Decoding with the strictness of the Python codec (elastic_idl/_task/codec.py), so a
// bad input gets the same DecodeError field path on both sides:
//
//   - binary: protobuf-go keeps a known field number written with another wire
//     type as an unknown field; like the reference, the wire is walked after a
//     successful parse and such a field is an error (it is the other task shape);
//   - JSON: every key and value is checked against the descriptors first (unknown
//     key, wrong type, integer range), naming the field by its proto path with list
//     indices; then the message is built in key order, as protobuf's ParseDict,
//     whose few remaining errors (a Duration out of range, a lone surrogate in a
//     string) name the JSON keys as written;
//   - textproto: the "# proto-message:" header must name the requested shape.

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// Format is a serialized form of a task.
type Format string

// The formats Decode reads.
const (
	FormatBinary    Format = "binary"
	FormatJSON      Format = "json" // the TaskTemplate.custom dict as JSON text
	FormatTextproto Format = "textproto"
)

// Decode reads a task of the shape taskTypeVersion names (0 legacy, 1 kubeflow).
// The text formats are UTF-8 (a leading byte order mark is dropped); JSON is the
// TaskTemplate.custom dict as JSON text, an object of task fields, nested at most
// maxNesting deep and with no key given twice.
//
// Errors, in this order: *DecodeError for input larger than maxTaskBytes,
// *UnsupportedVersionError for a version other than 0 and 1, else *DecodeError
// naming the field at fault ("" for the input as a whole). Messages are one line.
func Decode(data []byte, format Format, taskTypeVersion int64) (*Task, error) {
	task, err := decode(data, format, taskTypeVersion, false)
	return task, bounded(err)
}

// decode is Decode; fromStr says the text formats' data was a str for the
// reference (the conformance request's), not bytes: it is then checked for lone
// surrogates only, where bytes are checked for other encodings and bad UTF-8.
func decode(data []byte, format Format, taskTypeVersion int64, fromStr bool) (*Task, error) {
	if len(data) > maxTaskBytes {
		return nil, &DecodeError{Reason: fmt.Sprintf("the input is larger than %s bytes, the largest task "+
			"elastic-idl reads", thousands(maxTaskBytes))}
	}
	msg, err := newMessage(taskTypeVersion)
	if err != nil {
		return nil, err
	}
	switch format {
	case FormatBinary:
		return decodeBinary(data, taskTypeVersion)
	case FormatTextproto, FormatJSON:
		text, err := asText(data, string(format), fromStr)
		if err != nil {
			return nil, err
		}
		if format == FormatTextproto {
			return decodeTextproto(text, taskTypeVersion)
		}
		v, err := parseTaskJSON(text)
		switch e := err.(type) {
		case nil:
		case *jsonDuplicateKey:
			return nil, &DecodeError{Field: e.key, Reason: e.Error(), Format: string(FormatJSON)}
		case *jsonTooDeep:
			return nil, &DecodeError{Reason: e.Error(), Format: string(FormatJSON)}
		default:
			return nil, &DecodeError{Reason: "malformed JSON: " + err.Error(), Format: string(FormatJSON)}
		}
		return fromValue(msg, v, string(FormatJSON))
	}
	return nil, &DecodeError{Reason: fmt.Sprintf("unknown format %s; expected one of binary, json, textproto",
		brief(string(format)))}
}

// bounded cuts a DecodeError's field and reason to one line each, as the
// reference's DecodeError does (the field is part of the contract).
func bounded(err error) error {
	if de, ok := err.(*DecodeError); ok {
		de.Field = oneLine(de.Field, maxFieldChars)
		de.Reason = oneLine(de.Reason, maxErrorChars)
	}
	return err
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// asText is the text of a text-format input (the reference's _as_text): UTF-8, a
// leading byte order mark dropped. Bytes in UTF-16 or UTF-32 are refused by name.
func asText(data []byte, format string, fromStr bool) (string, error) {
	if !fromStr {
		if other := otherEncoding(data); other != "" {
			return "", &DecodeError{
				Reason: "the input is " + other + " text; a task in a text format must be UTF-8", Format: format,
			}
		}
	}
	if !utf8.Valid(data) {
		reason := "not valid UTF-8; a task in a text format is UTF-8"
		if fromStr {
			reason = "not valid UTF-8 (a lone surrogate)"
		}
		return "", &DecodeError{Reason: reason, Format: format}
	}
	return strings.TrimPrefix(string(data), "\ufeff"), nil
}

// byteOrderMarks are the BOMs of the encodings a text task may not be in, UTF-32 first.
var byteOrderMarks = []struct{ bom, name string }{
	{"\xff\xfe\x00\x00", "UTF-32"}, {"\x00\x00\xfe\xff", "UTF-32"}, {"\xff\xfe", "UTF-16"}, {"\xfe\xff", "UTF-16"},
}

// otherEncoding is "UTF-16" or "UTF-32" when the bytes are text in that encoding
// (by its BOM, or ASCII with every other byte NUL), else "".
func otherEncoding(data []byte) string {
	for _, b := range byteOrderMarks {
		if strings.HasPrefix(string(data), b.bom) {
			return b.name
		}
	}
	sample := data
	if len(sample) > 512 {
		sample = sample[:512]
	}
	half := len(sample) / 2
	nuls := func(start int) (int, []byte) {
		n, rest := 0, []byte{}
		for i := start; i < len(sample); i += 2 {
			if sample[i] == 0 {
				n++
			}
			rest = append(rest, sample[i])
		}
		return n, rest
	}
	oddNULs, odd := nuls(1)
	evenNULs, even := nuls(0)
	if half >= 2 && (oddNULs == half || evenNULs == half) {
		other := odd
		if oddNULs == half {
			other = even
		}
		if looksLikeText(other) {
			return "UTF-16"
		}
	}
	return ""
}

// looksLikeText: mostly printable ASCII and no NUL.
func looksLikeText(data []byte) bool {
	if len(data) > 4096 {
		data = data[:4096]
	}
	printable := 0
	for _, b := range data {
		if b == 0 {
			return false
		}
		if (b >= 32 && b < 127) || b == 9 || b == 10 || b == 13 {
			printable++
		}
	}
	return len(data) > 0 && float64(printable) >= 0.9*float64(len(data))
}

// FromStructStrict reads the task from TaskTemplate.custom as the backend gets it: a
// protobuf Struct, whose numbers are all doubles (integral ones are read as
// integers). A Struct's keys have no order: when several are wrong, the first in
// sorted order is reported. A nil Struct is no task (a DecodeError). A key or enum
// name this version does not know is a DecodeError (FromStruct leaves it out instead).
func FromStructStrict(custom *structpb.Struct, taskTypeVersion int64) (*Task, error) {
	msg, err := newMessage(taskTypeVersion)
	if err != nil {
		return nil, err
	}
	var v jsonValue
	if custom != nil {
		v = fromStructValue(structpb.NewStructValue(custom))
	}
	task, err := fromValue(msg, v, "custom")
	return task, bounded(err)
}

func fromStructValue(v *structpb.Value) jsonValue {
	switch k := v.GetKind().(type) {
	case *structpb.Value_BoolValue:
		return k.BoolValue
	case *structpb.Value_NumberValue:
		return jsonNumber{lit: pyFloatRepr(k.NumberValue), isFloat: true, f: k.NumberValue}
	case *structpb.Value_StringValue:
		return k.StringValue
	case *structpb.Value_ListValue:
		out := []jsonValue{}
		for _, item := range k.ListValue.GetValues() {
			out = append(out, fromStructValue(item))
		}
		return out
	case *structpb.Value_StructValue:
		obj := newObject()
		for _, key := range sortedKeys(k.StructValue.GetFields()) {
			obj.set(key, fromStructValue(k.StructValue.GetFields()[key]))
		}
		return obj
	}
	return nil // NullValue, or no kind
}

// ------------------------------------------------------------------ binary

func decodeBinary(raw []byte, taskTypeVersion int64) (*Task, error) {
	msg, err := newMessage(taskTypeVersion)
	if err != nil {
		return nil, err
	}
	garbled := func(err error) error {
		return &DecodeError{
			Reason: fmt.Sprintf("not a valid %s (truncated or garbled binary: %v)",
				msg.ProtoReflect().Descriptor().Name(), err),
			Format: string(FormatBinary),
		}
	}
	normalised, err := upbNormalize(raw, msg.ProtoReflect().Descriptor())
	if err != nil {
		return nil, garbled(err)
	}
	if err := proto.Unmarshal(normalised, msg); err != nil {
		return nil, garbled(err)
	}
	restoreUnknown(raw, msg.ProtoReflect())
	if err := checkWireTypes(raw, msg.ProtoReflect().Descriptor(), "", taskTypeVersion); err != nil {
		return nil, err
	}
	return taskOf(msg), nil
}

// wireTypeOf is the wire type a field of this kind is written with (unpacked).
func wireTypeOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.DoubleKind, protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return protowire.Fixed64Type
	case protoreflect.FloatKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return protowire.Fixed32Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	}
	return protowire.VarintType
}

// checkWireTypes refuses a known field number written with another wire type
// (packed repeated scalars excepted). Unknown numbers stay allowed: a newer
// schema may send them. The bytes were parsed already, so they are well-formed.
func checkWireTypes(raw []byte, desc protoreflect.MessageDescriptor, path string, version int64) error {
	for len(raw) > 0 {
		num, wire, tagLen, n := upbField(raw)
		if n < 0 {
			return nil
		}
		value := raw[tagLen:n]
		raw = raw[n:]
		if wire == protowire.StartGroupType || wire == protowire.EndGroupType {
			return nil // never written by proto3; the reference stops here too
		}
		fd := desc.Fields().ByNumber(num)
		if fd == nil {
			continue
		}
		fpath := join(path, string(fd.Name()))
		expected := wireTypeOf(fd.Kind())
		packed := wire == protowire.BytesType && fd.IsList() && expected != protowire.BytesType
		if wire != expected && !packed {
			return &DecodeError{
				Field: fpath,
				Reason: fmt.Sprintf("field %d has wire type %d but %s.%s needs %d: "+
					"is this the other task shape (task_type_version %d was requested)?",
					num, wire, desc.Name(), fd.Name(), expected, version),
				Format: string(FormatBinary),
			}
		}
		if fd.Kind() == protoreflect.MessageKind && wire == protowire.BytesType &&
			strings.HasPrefix(string(fd.Message().FullName()), "elastic_idl.") {
			_, sizeLen, _ := consumeVarintUpb(value, 5)
			if err := checkWireTypes(value[sizeLen:], fd.Message(), fpath, version); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// ------------------------------------------------------------------ textproto

// pyLineBreaks are the line boundaries of Python's str.splitlines().
const pyLineBreaks = "\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029"

func decodeTextproto(text string, taskTypeVersion int64) (*Task, error) {
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
		for v := int64(0); v <= TaskTypeVersionKubeflow; v++ {
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
	if err := checkSpacedMinus(text); err != nil {
		return nil, err
	}
	if err := prototext.Unmarshal([]byte(pyStringEscapes(text)), msg); err != nil {
		return nil, &DecodeError{
			Field:  textprotoField(text, err.Error()),
			Reason: "bad textproto: " + err.Error(),
			Format: string(FormatTextproto),
		}
	}
	return taskOf(msg), nil
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
	textNamedField  = regexp.MustCompile(`(?:unknown field: |non-repeated field ")([\w.]+)`)
	textPosition    = regexp.MustCompile(`\(line (\d+):(\d+)\)`)
	textFieldBefore = regexp.MustCompile(`([\p{L}\p{N}_]+)\s*[:{]`)
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
	names := textFieldBefore.FindAllStringSubmatch(string(l[:col]), -1)
	if len(names) == 0 {
		return ""
	}
	return names[len(names)-1][1]
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
	rest := func() []rune {
		if i >= len(lines) {
			return nil
		}
		return []rune(lines[i])
	}
	for i < len(lines) {
		r := rest()
		for j < len(r) && isPySpace(r[j]) {
			j++
		}
		switch {
		case j >= len(r) || r[j] == '#':
			i, j = i+1, 0
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

// ------------------------------------------------------------------ JSON / custom

// fromValue checks then builds, as the reference's _from_mapping does.
func fromValue(msg proto.Message, v jsonValue, format string) (*Task, error) {
	obj, ok := v.(*jsonObject)
	if !ok {
		kind := pyTypeName(v)
		if v == nil {
			kind = "null"
		}
		return nil, &DecodeError{
			Reason: "expected an object of task fields at the top level, got " + kind, Format: format,
		}
	}
	desc := msg.ProtoReflect().Descriptor()
	normalised, err := checkObject(obj, desc, format)
	if err != nil {
		return nil, err
	}
	if err := buildMessage(msg.ProtoReflect(), normalised, format); err != nil {
		return nil, err
	}
	return taskOf(msg), nil
}

func pyTypeName(v jsonValue) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case jsonNumber:
		if x.isFloat {
			return "float"
		}
		return "int"
	case string:
		return "str"
	case []jsonValue:
		return "list"
	}
	return "dict"
}

func fieldByKey(desc protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	if fd := desc.Fields().ByName(protoreflect.Name(key)); fd != nil {
		return fd
	}
	return desc.Fields().ByJSONName(key)
}

func knownKeys(desc protoreflect.MessageDescriptor) string {
	var names []string
	for i := 0; i < desc.Fields().Len(); i++ {
		names = append(names, desc.Fields().Get(i).JSONName())
	}
	return strings.Join(sortedStrings(names), ", ")
}

// under puts a field name or a list index ("[3]") in front of the field of a
// DecodeError from inside it: paths are built only for errors.
func under(err error, step string) error {
	de, ok := err.(*DecodeError)
	if !ok {
		return err
	}
	switch {
	case de.Field == "":
		de.Field = step
	case strings.HasPrefix(de.Field, "["):
		de.Field = step + de.Field
	default:
		de.Field = step + "." + de.Field
	}
	return de
}

// checkObject walks an object against a message descriptor so that errors name
// the exact field; it returns a copy whose integer and enum numbers are int64.
func checkObject(obj *jsonObject, desc protoreflect.MessageDescriptor, format string) (*jsonObject, error) {
	out := &jsonObject{keys: obj.keys, vals: make(map[string]jsonValue, len(obj.keys))}
	given := map[protoreflect.Name]string{} // field -> the key that set it
	for _, key := range obj.keys {
		value := obj.vals[key]
		fd := fieldByKey(desc, key)
		if fd == nil {
			return nil, &DecodeError{
				Field:  key,
				Reason: fmt.Sprintf("unknown field of %s (known: %s)", desc.Name(), knownKeys(desc)),
				Format: format,
			}
		}
		if first, ok := given[fd.Name()]; ok { // both names of one field
			return nil, &DecodeError{
				Field:  string(fd.Name()),
				Reason: fmt.Sprintf("given twice, as %s and %s", pyStrRepr(first), pyStrRepr(key)),
				Format: format,
			}
		}
		given[fd.Name()] = key
		switch {
		case value == nil:
			out.vals[key] = nil // null means unset in proto3 JSON
		case fd.IsList():
			items, ok := value.([]jsonValue)
			if !ok {
				return nil, &DecodeError{
					Field: string(fd.Name()), Reason: "expected a list, got " + pyTypeName(value), Format: format,
				}
			}
			checked := make([]jsonValue, len(items))
			for i, item := range items {
				c, err := checkValue(fd, item, format)
				if err != nil {
					return nil, under(under(err, fmt.Sprintf("[%d]", i)), string(fd.Name()))
				}
				checked[i] = c
			}
			out.vals[key] = checked
		default:
			c, err := checkValue(fd, value, format)
			if err != nil {
				return nil, under(err, string(fd.Name()))
			}
			out.vals[key] = c
		}
	}
	return out, nil
}

var durationRe = pyRegexp(durationPattern)

func checkValue(fd protoreflect.FieldDescriptor, value jsonValue, format string) (jsonValue, error) {
	bad := func(reason string) (jsonValue, error) {
		return nil, &DecodeError{Reason: reason, Format: format}
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		switch md.FullName() {
		case "google.protobuf.Duration":
			s, ok := value.(string)
			if !ok || !durationRe.MatchString(s) {
				return bad(fmt.Sprintf(`expected a duration such as "30s" or "1.5s", got %s`, pyRepr(value)))
			}
			return s, nil
		case "google.protobuf.Timestamp":
			if _, ok := value.(string); !ok {
				return bad("expected an RFC 3339 timestamp string, got " + pyRepr(value))
			}
			return value, nil
		}
		obj, ok := value.(*jsonObject)
		if !ok {
			return bad(fmt.Sprintf("expected an object (%s), got %s", md.Name(), pyTypeName(value)))
		}
		return checkObject(obj, md, format)
	case protoreflect.EnumKind:
		ed := fd.Enum()
		switch x := value.(type) {
		case string:
			if ed.Values().ByName(protoreflect.Name(x)) == nil {
				return bad(fmt.Sprintf("unknown %s %s; expected one of %s", ed.Name(), pyRepr(x), enumNames(ed)))
			}
			return x, nil
		case jsonNumber:
			// Kept even when the schema does not define it (proto3 enums are open);
			// validation reports it as enum.known.
			return checkInteger(value, format, math.MinInt32, math.MaxInt32)
		}
		return bad(fmt.Sprintf("expected one of %s, got %s", enumNames(ed), pyRepr(value)))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return checkInteger(value, format, math.MinInt32, math.MaxInt32)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return checkInteger(value, format, 0, math.MaxUint32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return checkInteger(value, format, math.MinInt64, math.MaxInt64)
	case protoreflect.BoolKind:
		if _, ok := value.(bool); !ok {
			return bad("expected true or false, got " + pyRepr(value))
		}
	case protoreflect.StringKind:
		if _, ok := value.(string); !ok {
			return bad(fmt.Sprintf("expected a string, got %s %s", pyTypeName(value), pyRepr(value)))
		}
	}
	// uint64 and fixed64, floats and bytes: no such field in this schema; the
	// builder refuses them.
	return value, nil
}

func enumNames(ed protoreflect.EnumDescriptor) string {
	names := make([]string, ed.Values().Len())
	for i := range names {
		names[i] = string(ed.Values().Get(i).Name())
	}
	return strings.Join(names, ", ")
}

// checkInteger accepts what the reference's _integer does: an int, an integral
// float, or a string Python's int() reads; then checks the range.
func checkInteger(value jsonValue, format string, lo, hi int64) (jsonValue, error) {
	notInt := func() error {
		return &DecodeError{Reason: "expected an integer, got " + pyRepr(value), Format: format}
	}
	outOfRange := func(n fmt.Stringer) error {
		return &DecodeError{Reason: fmt.Sprintf("%s is out of range %d..%d", n, lo, hi), Format: format}
	}
	switch x := value.(type) {
	case jsonNumber:
		if x.isFloat {
			if math.IsInf(x.f, 0) || math.IsNaN(x.f) || x.f != math.Trunc(x.f) {
				return nil, notInt()
			}
			if x.f < float64(lo) || x.f > float64(hi) || x.f >= math.MaxInt64 {
				n, _ := big.NewFloat(x.f).Int(nil)
				return nil, outOfRange(n)
			}
			return jsonInt(int64(x.f)), nil
		}
		if n, err := strconv.ParseInt(x.lit, 10, 64); err == nil {
			if n < lo || n > hi {
				return nil, outOfRange(big.NewInt(n))
			}
			if x.lit == "-0" {
				return jsonInt(0), nil
			}
			return x, nil
		}
		n, ok := new(big.Int).SetString(x.lit, 10)
		if !ok {
			return nil, notInt()
		}
		return nil, outOfRange(n) // beyond int64: out of every range here
	case string:
		n, ok := pyParseInt(x)
		if !ok {
			return nil, notInt()
		}
		if n.Cmp(big.NewInt(lo)) < 0 || n.Cmp(big.NewInt(hi)) > 0 {
			return nil, outOfRange(n)
		}
		return jsonInt(n.Int64()), nil
	}
	return nil, notInt()
}

// buildMessage sets the checked values in key order as protobuf's ParseDict:
// null clears, a repeated field is replaced, a message is merged into, a
// Duration is parsed. Its errors name the fields without list indices, as the
// reference reads them off protobuf's message.
func buildMessage(m protoreflect.Message, obj *jsonObject, format string) error {
	desc := m.Descriptor()
	for _, key := range obj.keys {
		fd := fieldByKey(desc, key)
		if err := buildField(m, fd, obj.vals[key], format); err != nil {
			return under(err, string(fd.Name()))
		}
	}
	return nil
}

func buildField(m protoreflect.Message, fd protoreflect.FieldDescriptor, value jsonValue, format string) error {
	if value == nil {
		m.Clear(fd)
		return nil
	}
	if fd.IsList() {
		m.Clear(fd)
		list := m.Mutable(fd).List()
		for _, item := range value.([]jsonValue) {
			if fd.Kind() == protoreflect.MessageKind {
				elem := list.NewElement()
				if err := setMessage(elem.Message(), fd, item, format); err != nil {
					return err
				}
				list.Append(elem)
				continue
			}
			v, err := scalarValue(fd, item, format)
			if err != nil {
				return err
			}
			list.Append(v)
		}
		return nil
	}
	if fd.Kind() == protoreflect.MessageKind {
		return setMessage(m.Mutable(fd).Message(), fd, value, format)
	}
	v, err := scalarValue(fd, value, format)
	if err != nil {
		return err
	}
	m.Set(fd, v)
	return nil
}

func setMessage(m protoreflect.Message, fd protoreflect.FieldDescriptor, value jsonValue, format string) error {
	if fd.Message().FullName() == "google.protobuf.Duration" {
		seconds, nanos, err := parsePyDuration(value.(string))
		if err != nil {
			return &DecodeError{Reason: err.Error(), Format: format}
		}
		fields := m.Descriptor().Fields()
		m.Set(fields.ByName("seconds"), protoreflect.ValueOfInt64(seconds))
		m.Set(fields.ByName("nanos"), protoreflect.ValueOfInt32(nanos))
		return nil
	}
	obj, ok := value.(*jsonObject)
	if !ok {
		return &DecodeError{Reason: "expected an object", Format: format}
	}
	return buildMessage(m, obj, format)
}

func scalarValue(fd protoreflect.FieldDescriptor, value jsonValue, format string) (protoreflect.Value, error) {
	bad := func(reason string) error { return &DecodeError{Reason: reason, Format: format} }
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if s, ok := value.(string); ok {
			return protoreflect.ValueOfEnum(fd.Enum().Values().ByName(protoreflect.Name(s)).Number()), nil
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(numberOf(value))), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(numberOf(value))), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(numberOf(value))), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(numberOf(value)), nil
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(value.(bool)), nil
	case protoreflect.StringKind:
		s := value.(string)
		if !utf8.ValidString(s) { // a lone surrogate: protobuf cannot hold it
			return protoreflect.Value{}, bad("not valid UTF-8 (a lone surrogate?): " + pyRepr(s))
		}
		return protoreflect.ValueOfString(s), nil
	}
	return protoreflect.Value{}, bad("cannot set " + pyRepr(value))
}

// numberOf is the int64 of a value checkInteger returned.
func numberOf(v jsonValue) int64 {
	n, _ := strconv.ParseInt(v.(jsonNumber).lit, 10, 64)
	return n
}

// parsePyDuration parses as protobuf Python's Duration.FromJsonString, after the
// reference's pattern check: digits may be any Unicode decimal digits.
func parsePyDuration(s string) (int64, int32, error) {
	if !strings.HasSuffix(s, "s") {
		return 0, 0, fmt.Errorf(`couldn't parse duration %s: it must end with the letter "s"`, pyRepr(s))
	}
	body := strings.TrimSuffix(s, "s")
	neg := strings.HasPrefix(body, "-")
	intPart, frac := body, ""
	if i := strings.IndexByte(body, '.'); i >= 0 {
		intPart, frac = body[:i], body[i+1:]
	}
	secs, ok := pyParseInt(intPart)
	if !ok {
		return 0, 0, fmt.Errorf("couldn't parse duration %s", pyRepr(s))
	}
	var nanos int64
	if frac != "" {
		digits := []rune(frac)
		for len(digits) < 9 {
			digits = append(digits, '0')
		}
		for _, r := range digits {
			d, _ := digitValue(r)
			nanos = nanos*10 + int64(d)
		}
		if neg {
			nanos = -nanos
		}
	}
	if secs.Cmp(big.NewInt(-maxDurationS)) < 0 || secs.Cmp(big.NewInt(maxDurationS)) > 0 {
		return 0, 0, fmt.Errorf("couldn't parse duration %s: out of range", pyRepr(s))
	}
	return secs.Int64(), int32(nanos), nil
}

// ------------------------------------------------------------------ Python's text rules

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
		if !ok {
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
		return fmt.Sprintf("%q", x)
	case []jsonValue:
		return "[...]"
	}
	return "{...}"
}

// ------------------------------------------------------------------ the reference's wire rules

// The Python reference parses with upb, which differs from protobuf-go at the
// edges of the wire format. upbNormalize refuses what upb refuses and rewrites
// what upb accepts but protobuf-go does not; restoreUnknown then gives each
// message its unknown fields as the input wrote them (protobuf-go re-encodes
// their tags; upb keeps the bytes).
//
// upb's rules: a tag is at most 5 bytes and fits 32 bits; a length is at most 5
// bytes; a varint is at most 10 bytes, and the bits of the 10th byte above the
// 64th are dropped (protobuf-go refuses them); messages and groups nest at most
// upbMaxDepth deep.

const upbMaxDepth = 100

var errWire = fmt.Errorf("malformed wire data")

// consumeVarintUpb reads a varint as upb does: up to 10 bytes; it also returns
// the 10th byte's bits above the 64th, which protobuf-go refuses (junk).
func consumeVarintUpb(b []byte, maxLen int) (v uint64, n int, junk bool) {
	for i := 0; i < len(b) && i < maxLen; i++ {
		v |= uint64(b[i]&0x7F) << (7 * uint(i))
		if b[i]&0x80 == 0 {
			return v, i + 1, i == 9 && b[i] > 1
		}
	}
	return 0, -1, false
}

// upbNormalize checks raw against upb's rules (with the message's descriptor, so
// known submessages are checked too) and returns bytes protobuf-go reads the same
// way: raw itself when nothing needs rewriting.
func upbNormalize(raw []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	out := append([]byte(nil), raw...)
	changed := false
	if _, err := upbWalk(out, md, upbMaxDepth, 0, &changed); err != nil {
		return nil, err
	}
	if !changed {
		return raw, nil
	}
	return out, nil
}

// upbWalk walks the fields of b (a message, or a group's body when group != 0),
// fixing 10th-byte junk in place, and returns the bytes it consumed.
func upbWalk(b []byte, md protoreflect.MessageDescriptor, depth int, group protowire.Number, changed *bool) (int, error) {
	pos := 0
	for pos < len(b) {
		tag, n, _ := consumeVarintUpb(b[pos:], 5)
		if n < 0 || tag > 0xFFFFFFFF {
			return 0, errWire
		}
		pos += n
		num, wire := protowire.Number(tag>>3), protowire.Type(tag&7)
		if num == 0 {
			return 0, errWire
		}
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByNumber(num)
		}
		switch wire {
		case protowire.VarintType:
			_, n, junk := consumeVarintUpb(b[pos:], 10)
			if n < 0 {
				return 0, errWire
			}
			if junk {
				b[pos+9] &= 1
				*changed = true
			}
			pos += n
		case protowire.Fixed32Type, protowire.Fixed64Type:
			size := 4
			if wire == protowire.Fixed64Type {
				size = 8
			}
			if len(b)-pos < size {
				return 0, errWire
			}
			pos += size
		case protowire.BytesType:
			size, n, _ := consumeVarintUpb(b[pos:], 5)
			if n < 0 || size >= math.MaxInt32 || uint64(len(b)-pos-n) < size {
				return 0, errWire
			}
			pos += n
			body := b[pos : pos+int(size)]
			pos += int(size)
			switch {
			case fd == nil:
			case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
				if depth-1 < 0 {
					return 0, errWire
				}
				if _, err := upbWalk(body, fd.Message(), depth-1, 0, changed); err != nil {
					return 0, err
				}
			case fd.IsList() && wireTypeOf(fd.Kind()) == protowire.VarintType: // packed varints
				for p := 0; p < len(body); {
					_, n, junk := consumeVarintUpb(body[p:], 10)
					if n < 0 {
						return 0, errWire
					}
					if junk {
						body[p+9] &= 1
						*changed = true
					}
					p += n
				}
			}
		case protowire.StartGroupType:
			if depth-1 < 0 {
				return 0, errWire
			}
			// A group is never a known field in proto3: its body is unknown fields.
			n, err := upbWalk(b[pos:], nil, depth-1, num, changed)
			if err != nil {
				return 0, err
			}
			pos += n
		case protowire.EndGroupType:
			if group == 0 || num != group {
				return 0, errWire
			}
			return pos, nil
		default:
			return 0, errWire
		}
	}
	if group != 0 {
		return 0, errWire // no end of group
	}
	return pos, nil
}

// restoreUnknown gives m and its submessages their unknown fields as written in
// raw (bytes that parsed into m), in order.
func restoreUnknown(raw []byte, m protoreflect.Message) {
	unknown := map[protoreflect.Message][]byte{}
	order := []protoreflect.Message{}
	collectUnknown(raw, m, unknown, &order)
	for _, msg := range order {
		msg.SetUnknown(unknown[msg])
	}
}

func collectUnknown(raw []byte, m protoreflect.Message, unknown map[protoreflect.Message][]byte,
	order *[]protoreflect.Message,
) {
	if _, seen := unknown[m]; !seen {
		unknown[m] = nil
		*order = append(*order, m)
	}
	next := map[protoreflect.FieldNumber]int{} // next element of each repeated message field
	for len(raw) > 0 {
		num, wire, tagLen, n := upbField(raw)
		if n < 0 {
			return
		}
		field := raw[:n]
		value := raw[tagLen:n]
		raw = raw[n:]
		fd := m.Descriptor().Fields().ByNumber(num)
		switch {
		case fd == nil || wire != wireTypeOf(fd.Kind()) && !(wire == protowire.BytesType && fd.IsList()):
			unknown[m] = append(unknown[m], field...)
		case fd.Kind() == protoreflect.MessageKind && wire == protowire.BytesType:
			_, sizeLen, _ := consumeVarintUpb(value, 5)
			body := value[sizeLen:]
			if fd.IsList() {
				list := m.Get(fd).List()
				if i := next[num]; i < list.Len() {
					next[num]++
					collectUnknown(body, list.Get(i).Message(), unknown, order)
				}
			} else {
				collectUnknown(body, m.Mutable(fd).Message(), unknown, order)
			}
		}
	}
}

// upbField reads one field of bytes upbNormalize accepted: its number and wire
// type, the length of its tag and of the whole field (-1 when malformed).
func upbField(b []byte) (protowire.Number, protowire.Type, int, int) {
	tag, tagLen, _ := consumeVarintUpb(b, 5)
	if tagLen < 0 {
		return 0, 0, 0, -1
	}
	num, wire := protowire.Number(tag>>3), protowire.Type(tag&7)
	pos := tagLen
	switch wire {
	case protowire.VarintType:
		_, n, _ := consumeVarintUpb(b[pos:], 10)
		if n < 0 {
			return 0, 0, 0, -1
		}
		pos += n
	case protowire.Fixed32Type:
		pos += 4
	case protowire.Fixed64Type:
		pos += 8
	case protowire.BytesType:
		size, n, _ := consumeVarintUpb(b[pos:], 5)
		if n < 0 {
			return 0, 0, 0, -1
		}
		pos += n + int(size)
	case protowire.StartGroupType:
		for {
			if pos >= len(b) {
				return 0, 0, 0, -1
			}
			inner, innerWire, _, n := upbField(b[pos:])
			if n < 0 {
				return 0, 0, 0, -1
			}
			pos += n
			if innerWire == protowire.EndGroupType && inner == num {
				break
			}
		}
	case protowire.EndGroupType:
	default:
		return 0, 0, 0, -1
	}
	if pos > len(b) {
		return 0, 0, 0, -1
	}
	return num, wire, tagLen, pos
}
