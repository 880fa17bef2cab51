package elasticidl

// Reading the custom dict (JSON text, or the Struct a TaskTemplate carries): every key
// and value checked against the descriptors first, naming the field by its proto path
// with list indices; then the message built in key order, as protobuf's ParseDict.

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// FromStructStrict reads the task from TaskTemplate.custom as the backend gets it: a
// protobuf Struct, whose numbers are all doubles (integral ones are read as
// integers). A Struct's keys have no order: when several are wrong, the first in
// sorted order is reported. A nil Struct is no task (a DecodeError). A key or enum
// name this version does not know is a DecodeError (FromStruct leaves it out instead).
// The Struct is read only as far as the checks go: nothing under an unknown key or
// a value of the wrong type is converted.
func FromStructStrict(custom *structpb.Struct, taskTypeVersion int32) (*Task, error) {
	msg, err := newMessage(taskTypeVersion)
	if err != nil {
		return nil, err
	}
	var v jsonValue
	if custom != nil {
		v = fromStructObject(custom, msg.ProtoReflect().Descriptor(), false)
	}
	task, err := fromValue(msg, v, "custom")
	return task, bounded(err)
}

// fromStructObject is the fields of a Struct for a message of desc, in sorted key
// order as checkObject reads them, up to the first unknown key (the error
// checkObject then reports, without reading its value). With all, every unknown
// key is kept (its value unread, as None) for pruneObject to leave out.
func fromStructObject(s *structpb.Struct, desc protoreflect.MessageDescriptor, all bool) *jsonObject {
	obj := newObject()
	fields := s.GetFields()
	for _, key := range sortedKeys(fields) {
		fd := fieldByKey(desc, key)
		if fd == nil {
			obj.set(key, nil)
			if !all {
				break
			}
			continue
		}
		obj.set(key, fromStructField(fields[key], fd, fd.IsList(), all))
	}
	return obj
}

// fromStructField is a Struct value for the field fd (the whole list when list is
// true, else one value). A list or an object where the field takes none is
// refused for its type alone: an empty one stands for it.
func fromStructField(v *structpb.Value, fd protoreflect.FieldDescriptor, list, all bool) jsonValue {
	switch k := v.GetKind().(type) {
	case *structpb.Value_ListValue:
		if !list {
			return []jsonValue{}
		}
		items := k.ListValue.GetValues()
		out := make([]jsonValue, len(items))
		for i, item := range items {
			out[i] = fromStructField(item, fd, false, all)
		}
		return out
	case *structpb.Value_StructValue:
		if list || fd.Kind() != protoreflect.MessageKind || strings.HasPrefix(string(fd.Message().FullName()), "google.") {
			return newObject()
		}
		return fromStructObject(k.StructValue, fd.Message(), all)
	case *structpb.Value_BoolValue:
		return k.BoolValue
	case *structpb.Value_NumberValue:
		return jsonNumber{lit: pyFloatRepr(k.NumberValue), isFloat: true, f: k.NumberValue}
	case *structpb.Value_StringValue:
		return k.StringValue
	}
	return nil // NullValue, or no kind
}

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

// fieldKeys is every key a field of desc may be written as: its JSON name and its proto name.
func fieldKeys(desc protoreflect.MessageDescriptor) []string {
	keys := make([]string, 0, 2*desc.Fields().Len())
	for i := 0; i < desc.Fields().Len(); i++ {
		fd := desc.Fields().Get(i)
		keys = append(keys, fd.JSONName(), string(fd.Name()))
	}
	return keys
}

// taskDescriptors is the message of each task shape, by task_type_version (0, 1).
var taskDescriptors = func() [2]protoreflect.MessageDescriptor {
	var out [2]protoreflect.MessageDescriptor
	for v := range out {
		msg, _ := newMessage(int32(v))
		out[v] = msg.ProtoReflect().Descriptor()
	}
	return out
}()

// otherShapeHint is, for an unknown key of a task message that the other task shape has, which
// task_type_version to read the input as (the reference's _other_shape_hint); else "".
func otherShapeHint(desc protoreflect.MessageDescriptor, key string) string {
	for v, task := range taskDescriptors {
		other := 1 - v
		if task.FullName() != desc.FullName() || fieldByKey(taskDescriptors[other], key) == nil {
			continue
		}
		shape := "legacy"
		if other == TaskTypeVersionKubeflow {
			shape = "kubeflow"
		}
		return fmt.Sprintf("; %s is a field of the %s task shape: read the input as task_type_version %d "+
			"(command line: --task-type-version %d)", pyStrRepr(key), shape, other, other)
	}
	return ""
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
	var de *DecodeError
	if !errors.As(err, &de) {
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
	out := &jsonObject{keys: obj.keys, values: make([]jsonValue, len(obj.keys)), index: obj.index}
	for k, key := range obj.keys {
		value := obj.values[k]
		fd := fieldByKey(desc, key)
		if fd == nil {
			hint := otherShapeHint(desc, key)
			if hint == "" {
				hint = didYouMean(key, fieldKeys(desc))
			}
			return nil, &DecodeError{
				Field: key,
				// The hint first: a message is cut at maxErrorChars, and the list of known keys is long.
				Reason: fmt.Sprintf("unknown field of %s%s (known: %s)", desc.Name(), hint, knownKeys(desc)),
				Format: format,
			}
		}
		// Both names of one field. The keys before are known fields, each once: a short scan.
		for _, first := range obj.keys[:k] {
			if fieldByKey(desc, first) == fd {
				return nil, &DecodeError{
					Field:  string(fd.Name()),
					Reason: fmt.Sprintf("given twice, as %s and %s", pyStrRepr(first), pyStrRepr(key)),
					Format: format,
				}
			}
		}
		switch {
		case value == nil:
			out.values[k] = nil // null means unset in proto3 JSON
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
			out.values[k] = checked
		default:
			c, err := checkValue(fd, value, format)
			if err != nil {
				return nil, under(err, string(fd.Name()))
			}
			out.values[k] = c
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
			// The name, or a short name ("spawn"): the name is what is kept, and written back.
			name, ok := enumValueName(ed, x)
			if !ok {
				return bad(fmt.Sprintf("unknown %s %s; %s", ed.Name(), pyRepr(x), enumExpected(ed, x)))
			}
			return name, nil
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
		s, ok := value.(string)
		if !ok {
			return bad(fmt.Sprintf("expected a string, got %s %s", pyTypeName(value), pyRepr(value)))
		}
		if !utf8.ValidString(s) { // JSON's "\ud800": checked here, as the reference does, so the path has its index
			return bad("not valid UTF-8 (a lone surrogate): " + pyRepr(s))
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
		if err := buildField(m, fd, obj.value(key), format); err != nil {
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
			return &DecodeError{Reason: err.Error(), Format: format, Err: err}
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
