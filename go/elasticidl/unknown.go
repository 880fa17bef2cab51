package elasticidl

// Forward compatibility: a newer SDK's task through an older backend. The reference's
// tolerant decode (from_custom, decode(strict=False)) leaves out a JSON key or an enum
// name this version does not know and names each; binary unknown field numbers are kept
// (re-marshalling keeps their bytes) and named by their number.

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// FromStruct reads the task from TaskTemplate.custom as the backend gets it (see
// FromStructStrict), forward compatible: a key or an enum name this version does not
// know (a newer SDK's) is left out and listed by Task.UnknownFields. A key of the other
// task shape stays a *DecodeError (a task_type_version mismatch, flyteplugins#359).
// Every other error is FromStructStrict's.
func FromStruct(custom *structpb.Struct, taskTypeVersion int32) (*Task, error) {
	task, err := FromStructStrict(custom, taskTypeVersion)
	var de *DecodeError
	if !errors.As(err, &de) || custom == nil {
		return task, err
	}
	msg, _ := newMessage(taskTypeVersion) // FromStructStrict accepted the version
	return tolerant(fromStructObject(custom, msg.ProtoReflect().Descriptor(), true), taskTypeVersion, "custom", err)
}

// DecodeTolerant is Decode for a newer SDK's task: in JSON, a key or an enum name this
// version does not know is left out and listed by Task.UnknownFields, as
// FromStruct does; binary unknown fields are kept and listed in every decode.
// Textproto is strict. Every other error is Decode's.
func DecodeTolerant(data []byte, format Format, taskTypeVersion int32) (*Task, error) {
	task, err := Decode(data, format, taskTypeVersion)
	var de *DecodeError
	if !errors.As(err, &de) || format != FormatJSON {
		return task, err
	}
	text, textErr := asText(data, string(FormatJSON), false)
	if textErr != nil {
		return nil, err
	}
	v, parseErr := parseTaskJSON(text)
	if parseErr != nil {
		return nil, err
	}
	return tolerant(v, taskTypeVersion, string(FormatJSON), err)
}

// tolerant retries a strict decode that failed with strictErr on v without its unknown keys.
func tolerant(v jsonValue, taskTypeVersion int32, format string, strictErr error) (*Task, error) {
	msg, err := newMessage(taskTypeVersion)
	if err != nil {
		return nil, err
	}
	var skipped []string
	pruned := pruneObject(v, msg.ProtoReflect().Descriptor(), "", &skipped)
	if len(skipped) == 0 {
		return nil, strictErr
	}
	if err := otherShape(skipped, taskTypeVersion); err != nil {
		return nil, err
	}
	task, err := fromValue(msg, pruned, format)
	if err != nil {
		return nil, bounded(err)
	}
	task.skipped = skipped
	return task, nil
}

// otherShape refuses a top-level key of the other task shape (the reference's _other_shape).
func otherShape(skipped []string, taskTypeVersion int32) error {
	for _, path := range skipped {
		if strings.ContainsAny(path, ".[") {
			continue
		}
		for _, version := range []int32{TaskTypeVersionLegacy, TaskTypeVersionKubeflow} {
			if version == taskTypeVersion {
				continue
			}
			other, _ := newMessage(version)
			if fieldByKey(other.ProtoReflect().Descriptor(), path) != nil {
				return &DecodeError{
					Field: path,
					Reason: fmt.Sprintf("a field of the task_type_version %d shape, but the template says %d: "+
						"the backend would drop it (flyteplugins#359)", version, taskTypeVersion),
					Format: "custom",
				}
			}
		}
	}
	return nil
}

// pruneObject is v without the keys and enum names desc does not know; each one's path is
// appended to skipped (a key as written, under the field names of its parents).
func pruneObject(v jsonValue, desc protoreflect.MessageDescriptor, path string, skipped *[]string) jsonValue {
	obj, ok := v.(*jsonObject)
	if !ok {
		return v // a type error: the strict checks report it
	}
	out := newObject()
	for i, key := range obj.keys {
		value := obj.values[i]
		fd := fieldByKey(desc, key)
		if fd == nil {
			*skipped = append(*skipped, join(path, key))
			continue
		}
		fpath := join(path, string(fd.Name()))
		if items, isList := value.([]jsonValue); isList && fd.IsList() {
			kept := []jsonValue{}
			for i, item := range items {
				if x, keep := pruneValue(fd, item, fmt.Sprintf("%s[%d]", fpath, i), skipped); keep {
					kept = append(kept, x)
				}
			}
			out.set(key, kept)
			continue
		}
		if x, keep := pruneValue(fd, value, fpath, skipped); keep {
			out.set(key, x)
		}
	}
	return out
}

func pruneValue(fd protoreflect.FieldDescriptor, v jsonValue, path string, skipped *[]string) (jsonValue, bool) {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Duration", "google.protobuf.Timestamp":
			return v, true
		}
		return pruneObject(v, fd.Message(), path, skipped), true
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok {
			if _, known := enumValueName(fd.Enum(), s); !known {
				*skipped = append(*skipped, path)
				return nil, false
			}
		}
	}
	return v, true
}

// UnknownFields lists what this version did not know in the task it decoded: the JSON
// keys and enum names a tolerant decode left out (a key as written), then the binary
// unknown fields the message keeps, by number ("elastic_config.150"), at any depth.
// These are the paths of the reference's SkewWarnings. Empty for a task of this schema.
func (t *Task) UnknownFields() []string {
	out := append([]string{}, t.skipped...)
	unknownPaths(t.Message().ProtoReflect(), "", &out)
	return out
}

func unknownPaths(m protoreflect.Message, path string, out *[]string) {
	seen := map[protowire.Number]bool{}
	for b := []byte(m.GetUnknown()); len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < 0 {
			break
		}
		b = b[n+size:]
		if !seen[num] {
			seen[num] = true
			*out = append(*out, join(path, strconv.Itoa(int(num))))
		}
	}
	var set []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && !fd.IsMap() {
			set = append(set, fd)
		}
		return true
	})
	sort.Slice(set, func(i, j int) bool { return set[i].Number() < set[j].Number() })
	for _, fd := range set {
		fpath := join(path, string(fd.Name()))
		if fd.IsList() {
			list := m.Get(fd).List()
			for i := 0; i < list.Len(); i++ {
				unknownPaths(list.Get(i).Message(), fmt.Sprintf("%s[%d]", fpath, i), out)
			}
			continue
		}
		unknownPaths(m.Get(fd).Message(), fpath, out)
	}
}

// join is a field path one name deeper.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
