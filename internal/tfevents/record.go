package tfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// ErrTruncated is returned (wrapped) by ReadScalars when the file ends inside a record, as
// it does when the writer crashed or is still writing.
var ErrTruncated = errors.New("truncated record")

// ErrCorrupt is returned (wrapped) by ReadScalars when a record's checksum does not match
// or its data is not an Event.
var ErrCorrupt = errors.New("corrupt record")

// Sizes of the parts of a record around its data.
const (
	headerSize = 8 + 4 // length, masked CRC of length
	footerSize = 4     // masked CRC of data
)

// maskDelta is added to the rotated CRC by maskCRC, as in TensorFlow's crc32c::Mask.
const maskDelta = 0xa282ead8

// castagnoli is the CRC-32C table (polynomial 0x1EDC6F41, reflected 0x82F63B78).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC returns the masked CRC-32C of b that TFRecords store.
func maskedCRC(b []byte) uint32 {
	return maskCRC(crc32.Checksum(b, castagnoli))
}

// maskCRC rotates crc right by 15 bits and adds maskDelta, so that the CRC of data that
// itself holds CRCs is not trivially related to them.
func maskCRC(crc uint32) uint32 {
	return (crc>>15 | crc<<17) + maskDelta
}

// appendRecord appends data to b framed as one TFRecord.
func appendRecord(b, data []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(b[start:]))
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, maskedCRC(data))
}

// recordReader reads TFRecords one by one, checking both checksums of each.
type recordReader struct {
	r   io.Reader
	off int64 // offset of the next record
}

// next returns the data of the record at r.off and moves past it. It returns io.EOF at the
// end of the last whole record and an error naming the record's offset otherwise.
func (r *recordReader) next() ([]byte, error) {
	var header [headerSize]byte
	n, err := io.ReadFull(r.r, header[:])
	if n == 0 && err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, r.readError("header", err)
	}
	length := binary.LittleEndian.Uint64(header[:8])
	if err := checkCRC("length", header[8:], header[:8]); err != nil {
		return nil, r.corrupt(err)
	}
	if length > math.MaxInt64-footerSize {
		return nil, r.corrupt(fmt.Errorf("length %d is too large", length))
	}
	// Read through a growing buffer rather than make([]byte, length): memory then follows
	// the bytes the file holds, not the length its header claims.
	var buf bytes.Buffer
	buf.Grow(int(min(length+footerSize, 1<<20)))
	if _, err := io.CopyN(&buf, r.r, int64(length+footerSize)); err != nil {
		return nil, r.readError("data", err)
	}
	data := buf.Bytes()
	if err := checkCRC("data", data[length:], data[:length]); err != nil {
		return nil, r.corrupt(err)
	}
	r.off += headerSize + int64(length) + footerSize
	return data[:length], nil
}

// checkCRC compares the masked CRC stored in sum with that of data.
func checkCRC(what string, sum, data []byte) error {
	got, want := binary.LittleEndian.Uint32(sum), maskedCRC(data)
	if got != want {
		return fmt.Errorf("%s checksum is 0x%08x, want 0x%08x", what, got, want)
	}
	return nil
}

// corrupt wraps err as ErrCorrupt at the current record.
func (r *recordReader) corrupt(err error) error {
	return fmt.Errorf("record at offset %d: %w: %w", r.off, ErrCorrupt, err)
}

// readError wraps an error met while reading part of the current record; an early end of
// file is ErrTruncated.
func (r *recordReader) readError(part string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = ErrTruncated
	}
	return fmt.Errorf("record at offset %d: %s: %w", r.off, part, err)
}
