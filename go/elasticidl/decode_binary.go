package elasticidl

// Reading the wire format with the strictness of upb, protobuf Python's parser.

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func decodeBinary(raw []byte, taskTypeVersion int32) (*Task, error) {
	msg, err := newMessage(taskTypeVersion)
	if err != nil {
		return nil, err
	}
	garbled := func(err error) error {
		return &DecodeError{
			Reason: fmt.Sprintf("not a valid %s (truncated or garbled binary: %v)",
				msg.ProtoReflect().Descriptor().Name(), err),
			Format: string(FormatBinary),
			Err:    err,
		}
	}
	normalised, restore, err := upbNormalize(raw, msg.ProtoReflect().Descriptor())
	if err != nil {
		return nil, garbled(err)
	}
	if err := proto.Unmarshal(normalised, msg); err != nil {
		return nil, garbled(err)
	}
	if restore {
		restoreUnknown(raw, msg.ProtoReflect())
	}
	if err := checkWireTypes(raw, msg.ProtoReflect().Descriptor(), make([]string, 0, 8), taskTypeVersion); err != nil {
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
// path is the field names down to desc (joined only for an error).
func checkWireTypes(raw []byte, desc protoreflect.MessageDescriptor, path []string, version int32) error {
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
		fpath := append(path, string(fd.Name()))
		expected := wireTypeOf(fd.Kind())
		packed := wire == protowire.BytesType && fd.IsList() && expected != protowire.BytesType
		if wire != expected && !packed {
			return &DecodeError{
				Field: strings.Join(fpath, "."),
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

var errWire = errors.New("malformed wire data")

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
// way: raw itself when nothing needs rewriting. restore says whether protobuf-go
// would keep some unknown field otherwise than the input wrote it (restoreUnknown).
func upbNormalize(raw []byte, md protoreflect.MessageDescriptor) (normalised []byte, restore bool, err error) {
	out := append([]byte(nil), raw...)
	var st upbState
	if _, err := upbWalk(out, md, upbMaxDepth, 0, &st); err != nil {
		return nil, false, err
	}
	restore = st.junk || st.longTag
	if !st.junk {
		return raw, restore, nil
	}
	return out, restore, nil
}

// upbState is what a walk found: 10th-byte junk (fixed in place), a tag written
// in more bytes than it needs (which protobuf-go re-encodes in an unknown field).
type upbState struct{ junk, longTag bool }

// skipVarint reads one varint value at the start of b as upb does (up to 10
// bytes) and returns its length, negative when it is malformed. A tenth byte
// with junk above its lowest bit is cleared in place and noted in st.junk.
func (st *upbState) skipVarint(b []byte) int {
	_, n, junk := consumeVarintUpb(b, 10)
	if n >= 0 && junk {
		b[9] &= 1
		st.junk = true
	}
	return n
}

// upbWalk walks the fields of b (a message, or a group's body when group != 0),
// fixing 10th-byte junk in place, and returns the bytes it consumed.
func upbWalk(b []byte, md protoreflect.MessageDescriptor, depth int, group protowire.Number, st *upbState) (int, error) {
	pos := 0
	for pos < len(b) {
		tag, n, _ := consumeVarintUpb(b[pos:], 5)
		if n < 0 || tag > 0xFFFFFFFF {
			return 0, errWire
		}
		if n != protowire.SizeVarint(tag) {
			st.longTag = true
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
			n := st.skipVarint(b[pos:])
			if n < 0 {
				return 0, errWire
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
				if _, err := upbWalk(body, fd.Message(), depth-1, 0, st); err != nil {
					return 0, err
				}
			case fd.IsList() && wireTypeOf(fd.Kind()) == protowire.VarintType: // packed varints
				for p := 0; p < len(body); {
					n := st.skipVarint(body[p:])
					if n < 0 {
						return 0, errWire
					}
					p += n
				}
			}
		case protowire.StartGroupType:
			if depth-1 < 0 {
				return 0, errWire
			}
			// A group is never a known field in proto3: its body is unknown fields.
			n, err := upbWalk(b[pos:], nil, depth-1, num, st)
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
