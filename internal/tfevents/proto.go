package tfevents

import (
	"encoding/binary"
	"math"
)

// Protocol buffer wire types (https://protobuf.dev/programming-guides/encoding/).
const (
	wireVarint     = 0
	wireFixed64    = 1
	wireBytes      = 2
	wireStartGroup = 3
	wireEndGroup   = 4
	wireFixed32    = 5
)

// Field numbers of tensorflow.Event (tensorflow/core/util/event.proto).
const (
	eventWallTime    = 1
	eventStep        = 2
	eventFileVersion = 3 // oneof what
	eventGraphDef    = 4 // oneof what
	eventSummary     = 5 // oneof what
	eventLastOneof   = 9 // log_message 6, session_log 7, tagged_run_metadata 8, meta_graph_def 9
)

// Field numbers of tensorflow.Summary and tensorflow.Summary.Value
// (tensorflow/core/framework/summary.proto).
const (
	summaryValue = 1

	valueTag         = 1
	valueSimpleValue = 2 // oneof value
	valueFirstOther  = 3 // obsolete_old_style_histogram 3, image 4, histo 5, audio 6
	valueLastOther   = 6
	valueTensor      = 8 // oneof value
)

// event is the part of a tensorflow.Event that this package writes and reads. It holds
// either a fileVersion or summary values (the "what" oneof), or neither.
type event struct {
	wallTime    float64
	step        int64
	fileVersion string
	summary     []value
}

// value is a tensorflow.Summary.Value holding a simple_value.
type value struct {
	tag         string
	simpleValue float32
}

// appendEvent appends the serialization of e to b. Like the proto3 encoders, it leaves out
// a zero wall_time and step; the oneof field is written whenever it is set.
func appendEvent(b []byte, e event) []byte {
	if math.Float64bits(e.wallTime) != 0 {
		b = appendTag(b, eventWallTime, wireFixed64)
		b = appendFixed64(b, math.Float64bits(e.wallTime))
	}
	if e.step != 0 {
		b = appendTag(b, eventStep, wireVarint)
		b = appendVarint(b, uint64(e.step))
	}
	switch {
	case e.fileVersion != "":
		b = appendBytesField(b, eventFileVersion, []byte(e.fileVersion))
	case e.summary != nil:
		b = appendBytesField(b, eventSummary, appendSummary(nil, e.summary))
	}
	return b
}

// appendSummary appends the serialization of a tensorflow.Summary holding values.
func appendSummary(b []byte, values []value) []byte {
	for _, v := range values {
		b = appendBytesField(b, summaryValue, appendValue(nil, v))
	}
	return b
}

// appendValue appends the serialization of a tensorflow.Summary.Value. simple_value is in
// a oneof, so it is written even when it is zero.
func appendValue(b []byte, v value) []byte {
	if v.tag != "" {
		b = appendBytesField(b, valueTag, []byte(v.tag))
	}
	b = appendTag(b, valueSimpleValue, wireFixed32)
	return appendFixed32(b, math.Float32bits(v.simpleValue))
}

// appendBytesField appends a length-delimited field: a string, bytes or a message.
func appendBytesField(b []byte, field int, data []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = appendVarint(b, uint64(len(data)))
	return append(b, data...)
}

// appendTag appends a field's key: its number and wire type.
func appendTag(b []byte, field, wire int) []byte {
	return appendVarint(b, uint64(field)<<3|uint64(wire))
}

// appendVarint appends v in base-128, least significant group first. Negative int64
// values are written as their 64-bit two's complement, in 10 bytes.
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendFixed32 appends v little-endian (wire type fixed32, used for float).
func appendFixed32(b []byte, v uint32) []byte {
	return binary.LittleEndian.AppendUint32(b, v)
}

// appendFixed64 appends v little-endian (wire type fixed64, used for double).
func appendFixed64(b []byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(b, v)
}
