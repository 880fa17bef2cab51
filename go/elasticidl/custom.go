package elasticidl

// The TaskTemplate.custom dict of a task: proto3 JSON with camelCase keys and
// zero values left out, as protobuf Python's MessageToDict (and flytekit) write
// it. Written from the descriptors, not with protojson, so that the text of the
// ELASTIC_IDL_TASK env value is byte for byte the reference's (protojson varies
// its whitespace on purpose). A test checks the result equals protojson's as data.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// CustomJSON is the task's custom dict as the reference writes it into the
// container's ELASTIC_IDL_TASK env: sorted keys, no whitespace, \uXXXX escapes.
// Error: *EncodeError when a Duration has no JSON form.
func (t *Task) CustomJSON() (string, error) {
	obj, err := t.custom()
	if err != nil {
		return "", err
	}
	return pyDumps(obj), nil
}

// Custom is the task's custom dict as plain Go values (map[string]any, []any,
// string, bool, json.Number), ready for encoding/json or structpb.
func (t *Task) Custom() (map[string]any, error) {
	obj, err := t.custom()
	if err != nil {
		return nil, err
	}
	return plain(obj).(map[string]any), nil
}

// Struct is the task's custom dict as the protobuf Struct a TaskTemplate carries.
func (t *Task) Struct() (*structpb.Struct, error) {
	obj, err := t.custom()
	if err != nil {
		return nil, err
	}
	return structpb.NewStruct(plainFloat(obj).(map[string]any))
}

// errNotUTF8 is messageToDict's error for a string that is not valid UTF-8, which
// the reference cannot hold (and protobuf cannot serialize).
var errNotUTF8 = errors.New("a string is not valid UTF-8")

func (t *Task) custom() (*jsonObject, error) {
	obj, err := messageToDict(t.Message().ProtoReflect())
	if errors.Is(err, errNotUTF8) {
		field, _ := invalidUTF8(t.Message().ProtoReflect())
		return nil, &EncodeError{Field: field, Reason: "not valid UTF-8"}
	}
	if err != nil {
		field := ""
		for _, v := range t.Violations() {
			if v.Rule == ruleDurationValid {
				field = v.Field
				break
			}
		}
		return nil, &EncodeError{Field: field, Reason: "no proto3 JSON form (" + err.Error() + ")", Err: err}
	}
	return obj, nil
}

func messageToDict(m protoreflect.Message) (*jsonObject, error) {
	obj := newObject()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ { // field number order, as ListFields
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		var (
			v   jsonValue
			err error
		)
		if fd.IsList() {
			list := m.Get(fd).List()
			items := make([]jsonValue, list.Len())
			for j := range items {
				if items[j], err = singularToDict(fd, list.Get(j)); err != nil {
					return nil, err
				}
			}
			v = items
		} else if v, err = singularToDict(fd, m.Get(fd)); err != nil {
			return nil, err
		}
		obj.set(fd.JSONName(), v)
	}
	return obj, nil
}

func singularToDict(fd protoreflect.FieldDescriptor, v protoreflect.Value) (jsonValue, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		if fd.Message().FullName() == "google.protobuf.Duration" {
			f := fd.Message().Fields()
			m := v.Message()
			return formatDuration(m.Get(f.ByName("seconds")).Int(), int32(m.Get(f.ByName("nanos")).Int()))
		}
		return messageToDict(v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), nil
		}
		return jsonInt(int64(v.Enum())), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return jsonInt(v.Int()), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return jsonNumber{lit: strconv.FormatUint(v.Uint(), 10)}, nil
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.StringKind:
		if !utf8.ValidString(v.String()) {
			return nil, errNotUTF8
		}
		return v.String(), nil
	}
	return nil, fmt.Errorf("%s: field kind %s has no JSON form here", fd.FullName(), fd.Kind())
}

// formatDuration is a Duration's proto3 JSON text: 0, 3, 6 or 9 fractional digits.
func formatDuration(seconds int64, nanos int32) (string, error) {
	if seconds < -maxDurationS || seconds > maxDurationS || nanos <= -1e9 || nanos >= 1e9 ||
		(seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0) {
		return "", fmt.Errorf("invalid Duration seconds=%d nanos=%d", seconds, nanos)
	}
	sign := ""
	if seconds < 0 || nanos < 0 {
		sign, seconds, nanos = "-", -seconds, -nanos
	}
	out := sign + strconv.FormatInt(seconds, 10)
	switch {
	case nanos == 0:
	case nanos%1e6 == 0:
		out += fmt.Sprintf(".%03d", nanos/1e6)
	case nanos%1e3 == 0:
		out += fmt.Sprintf(".%06d", nanos/1e3)
	default:
		out += fmt.Sprintf(".%09d", nanos)
	}
	return out + "s", nil
}

// plain turns a parsed value into encoding/json's plain Go values.
func plain(v jsonValue) any {
	switch x := v.(type) {
	case jsonNumber:
		return json.Number(x.lit)
	case []jsonValue:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = plain(item)
		}
		return out
	case *jsonObject:
		out := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			out[k] = plain(x.value(k))
		}
		return out
	}
	return v
}

// plainFloat is plain with numbers as float64, for structpb.
func plainFloat(v jsonValue) any {
	switch x := v.(type) {
	case jsonNumber:
		f, _ := strconv.ParseFloat(x.lit, 64)
		return f
	case []jsonValue:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = plainFloat(item)
		}
		return out
	case *jsonObject:
		out := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			out[k] = plainFloat(x.value(k))
		}
		return out
	}
	return v
}
