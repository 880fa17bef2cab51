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
//
// This file holds the entry point and the text encodings; decode_binary.go,
// decode_json.go (JSON and Struct) and decode_textproto.go the formats, and
// pytext.go Python's rules for text they share.

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
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
// MaxNesting deep, with no key given twice and integers of at most
// MaxIntegerDigits digits (also given as strings).
//
// Errors, in this order: *DecodeError wrapping ErrTooLarge for input larger than MaxTaskBytes,
// *UnsupportedVersionError for a version other than 0 and 1, else *DecodeError
// naming the field at fault ("" for the input as a whole). Messages are one line.
func Decode(data []byte, format Format, taskTypeVersion int32) (*Task, error) {
	task, err := decode(data, format, taskTypeVersion, false)
	return task, bounded(err)
}

// decode is Decode; fromStr says the text formats' data was a str for the
// reference (the conformance request's), not bytes: it is then checked for lone
// surrogates only, where bytes are checked for other encodings and bad UTF-8.
func decode(data []byte, format Format, taskTypeVersion int32, fromStr bool) (*Task, error) {
	if len(data) > maxTaskBytes {
		return nil, tooLarge()
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
		if err != nil {
			return nil, jsonDecodeError(err)
		}
		return fromValue(msg, v, string(FormatJSON))
	}
	return nil, &DecodeError{Reason: fmt.Sprintf("unknown format %s; expected one of binary, json, textproto",
		brief(string(format)))}
}

// tooLarge is the DecodeError of an input larger than maxTaskBytes.
func tooLarge() *DecodeError { return &DecodeError{Reason: ErrTooLarge.Error(), Err: ErrTooLarge} }

// jsonDecodeError is the DecodeError of JSON text that parsePyJSON refuses.
func jsonDecodeError(err error) *DecodeError {
	var dup *jsonDuplicateKey
	var deep *jsonTooDeep
	switch {
	case errors.As(err, &dup):
		return &DecodeError{Field: dup.key, Reason: dup.Error(), Format: string(FormatJSON), Err: err}
	case errors.As(err, &deep):
		return &DecodeError{Reason: deep.Error(), Format: string(FormatJSON), Err: err}
	}
	return &DecodeError{Reason: "malformed JSON: " + err.Error(), Format: string(FormatJSON), Err: err}
}

// bounded cuts a DecodeError's field and reason to one line each, as the
// reference's DecodeError does (the field is part of the contract).
func bounded(err error) error {
	var de *DecodeError
	if errors.As(err, &de) {
		de.Field = oneLine(de.Field, maxFieldChars)
		de.Reason = oneLine(de.Reason, maxErrorChars)
	}
	return err
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
		if bytes.HasPrefix(data, []byte(b.bom)) {
			return b.name
		}
	}
	sample := data
	if len(sample) > 512 {
		sample = sample[:512]
	}
	half := len(sample) / 2
	nuls := func(start int) int {
		n := 0
		for i := start; i < len(sample); i += 2 {
			if sample[i] == 0 {
				n++
			}
		}
		return n
	}
	oddNULs, evenNULs := nuls(1), nuls(0)
	if half >= 2 && (oddNULs == half || evenNULs == half) {
		start := 0 // the bytes that are not the NULs
		if oddNULs != half {
			start = 1
		}
		if looksLikeText(sample, start) {
			return "UTF-16"
		}
	}
	return ""
}

// looksLikeText: every other byte of data from start is mostly printable ASCII, and no NUL.
func looksLikeText(data []byte, start int) bool {
	printable, n := 0, 0
	for i := start; i < len(data); i += 2 {
		b := data[i]
		if b == 0 {
			return false
		}
		if (b >= 32 && b < 127) || b == 9 || b == 10 || b == 13 {
			printable++
		}
		n++
	}
	return n > 0 && float64(printable) >= 0.9*float64(n)
}
