package tfevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// maxField is the largest field number protobuf allows.
const maxField = 1<<29 - 1

// errShort is returned when a message ends inside a field.
var errShort = errors.New("message ends inside a field")

// decoder reads protocol buffer fields from the front of b.
type decoder struct {
	b []byte
}

// done reports whether every field has been read.
func (d *decoder) done() bool { return len(d.b) == 0 }

// tag reads a field's key and returns its number and wire type.
func (d *decoder) tag() (field, wire int, err error) {
	k, err := d.varint()
	if err != nil {
		return 0, 0, err
	}
	if k>>3 < 1 || k>>3 > maxField {
		return 0, 0, fmt.Errorf("invalid field number %d", k>>3)
	}
	return int(k >> 3), int(k & 7), nil
}

// varint reads a base-128 varint.
func (d *decoder) varint() (uint64, error) {
	v, n := binary.Uvarint(d.b)
	switch {
	case n == 0:
		return 0, errShort
	case n < 0:
		return 0, errors.New("varint overflows 64 bits")
	}
	d.b = d.b[n:]
	return v, nil
}

// fixed32 reads 4 little-endian bytes.
func (d *decoder) fixed32() (uint32, error) {
	if len(d.b) < 4 {
		return 0, errShort
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v, nil
}

// fixed64 reads 8 little-endian bytes.
func (d *decoder) fixed64() (uint64, error) {
	if len(d.b) < 8 {
		return 0, errShort
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v, nil
}

// bytes reads a length-delimited field's contents.
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.varint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(d.b)) {
		return nil, errShort
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v, nil
}

// skip reads past the contents of a field whose key has been read.
func (d *decoder) skip(field, wire int) error {
	var err error
	switch wire {
	case wireVarint:
		_, err = d.varint()
	case wireFixed64:
		_, err = d.fixed64()
	case wireBytes:
		_, err = d.bytes()
	case wireFixed32:
		_, err = d.fixed32()
	case wireStartGroup:
		err = d.skipGroup(field)
	case wireEndGroup:
		err = fmt.Errorf("end of group %d that was not started", field)
	default:
		err = fmt.Errorf("field %d: invalid wire type %d", field, wire)
	}
	return err
}

// skipGroup reads past a (deprecated) group up to the end-group key matching field,
// skipping nested groups too.
func (d *decoder) skipGroup(field int) error {
	open := []int{field}
	for len(open) > 0 {
		f, w, err := d.tag()
		if err != nil {
			return err
		}
		switch w {
		case wireStartGroup:
			open = append(open, f)
		case wireEndGroup:
			if f != open[len(open)-1] {
				return fmt.Errorf("group %d ended by end of group %d", open[len(open)-1], f)
			}
			open = open[:len(open)-1]
		default:
			if err := d.skip(f, w); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeEvent parses a serialized tensorflow.Event, skipping fields it does not know. As
// in protobuf, the last of repeated scalar fields wins, summaries are merged, and setting a
// member of the "what" oneof clears the others.
func decodeEvent(data []byte) (event, error) {
	var e event
	d := decoder{data}
	for !d.done() {
		field, wire, err := d.tag()
		if err == nil {
			err = e.decodeField(&d, field, wire)
		}
		if err != nil {
			return event{}, fmt.Errorf("event: %w", err)
		}
	}
	return e, nil
}

// decodeField reads one field of an Event into e.
func (e *event) decodeField(d *decoder, field, wire int) error {
	switch {
	case field == eventWallTime && wire == wireFixed64:
		v, err := d.fixed64()
		e.wallTime = math.Float64frombits(v)
		return err
	case field == eventStep && wire == wireVarint:
		v, err := d.varint()
		e.step = int64(v)
		return err
	case field == eventFileVersion && wire == wireBytes:
		v, err := d.bytes()
		e.fileVersion, e.summary = string(v), nil
		return err
	case field == eventSummary && wire == wireBytes:
		return e.decodeSummary(d)
	case field >= eventGraphDef && field <= eventLastOneof && wire == wireBytes:
		e.fileVersion, e.summary = "", nil
	}
	return d.skip(field, wire)
}

// decodeSummary reads a Summary field and appends its simple values to e.summary.
func (e *event) decodeSummary(d *decoder) error {
	data, err := d.bytes()
	if err != nil {
		return err
	}
	e.fileVersion = ""
	if e.summary == nil {
		e.summary = []value{}
	}
	s := decoder{data}
	for !s.done() {
		field, wire, err := s.tag()
		if err == nil {
			err = e.decodeSummaryField(&s, field, wire)
		}
		if err != nil {
			return fmt.Errorf("summary: %w", err)
		}
	}
	return nil
}

// decodeSummaryField reads one field of a Summary, keeping values that hold a
// simple_value.
func (e *event) decodeSummaryField(d *decoder, field, wire int) error {
	if field != summaryValue || wire != wireBytes {
		return d.skip(field, wire)
	}
	data, err := d.bytes()
	if err != nil {
		return err
	}
	v, ok, err := decodeValue(data)
	if ok {
		e.summary = append(e.summary, v)
	}
	return err
}

// decodeValue parses a Summary.Value. ok is false when it holds no simple_value (an
// image, a histogram, a tensor...).
func decodeValue(data []byte) (v value, ok bool, err error) {
	d := decoder{data}
	for !d.done() {
		field, wire, err := d.tag()
		if err != nil {
			return value{}, false, fmt.Errorf("value: %w", err)
		}
		switch {
		case field == valueTag && wire == wireBytes:
			var tag []byte
			tag, err = d.bytes()
			v.tag = string(tag)
		case field == valueSimpleValue && wire == wireFixed32:
			var bits uint32
			bits, err = d.fixed32()
			v.simpleValue, ok = math.Float32frombits(bits), true
		case isOtherValue(field, wire):
			ok = false
			err = d.skip(field, wire)
		default:
			err = d.skip(field, wire)
		}
		if err != nil {
			return value{}, false, fmt.Errorf("value: %w", err)
		}
	}
	return v, ok, nil
}

// isOtherValue reports whether a Summary.Value field is a member of the value oneof other
// than simple_value.
func isOtherValue(field, wire int) bool {
	return wire == wireBytes &&
		(field >= valueFirstOther && field <= valueLastOther || field == valueTensor)
}
