package tfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readSample writes samplePoints and returns the file's path, its bytes and the offset
// just past each record (the first holds the file_version, record i+1 samplePoints[i]).
func readSample(t *testing.T) (string, []byte, []int) {
	t.Helper()
	path := writeEvents(t, samplePoints)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b, recordEnds(t, b)
}

// recordAt returns the index of the record holding byte off, and where it starts.
func recordAt(ends []int, off int) (index, start int) {
	for index = 0; off >= ends[index]; index++ {
		start = ends[index]
	}
	return index, start
}

// before returns the scalars of the records before record index.
func before(index int) []Scalar {
	return scalarsOf(samplePoints[:max(index-1, 0)])
}

func TestReadScalarsCorrupt(t *testing.T) {
	path, b, ends := readSample(t)
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	// Every damaged byte, in a length, a checksum or data, is caught by a checksum.
	for off := range b {
		damaged := bytes.Clone(b)
		damaged[off] ^= 0x20
		if err := os.WriteFile(corrupt, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadScalars(corrupt)
		index, start := recordAt(ends, off)
		where := fmt.Sprintf("record at offset %d: corrupt record: ", start)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), where) {
			t.Fatalf("byte %d flipped: error %v, want ErrCorrupt naming %q", off, err, where)
		}
		if diff := cmp.Diff(before(index), got); diff != "" {
			t.Fatalf("byte %d flipped: scalars before the error (-want +got):\n%s", off, diff)
		}
	}
	// The undamaged file reads whole.
	if _, err := ReadScalars(path); err != nil {
		t.Errorf("ReadScalars of the undamaged file: %v", err)
	}
}

func TestReadScalarsCorruptMessages(t *testing.T) {
	_, b, ends := readSample(t)
	cases := map[string]struct {
		off  int
		want string
	}{
		"length":        {off: ends[1], want: fmt.Sprintf("record at offset %d: corrupt record: length checksum is 0x", ends[1])},
		"data":          {off: ends[1] + headerSize, want: fmt.Sprintf("record at offset %d: corrupt record: data checksum is 0x", ends[1])},
		"data checksum": {off: ends[2] - 1, want: fmt.Sprintf("record at offset %d: corrupt record: data checksum is 0x", ends[1])},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			damaged := bytes.Clone(b)
			damaged[tc.off] ^= 0xff
			_, err := readScalars(bytes.NewReader(damaged))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadScalarsTruncated(t *testing.T) {
	_, b, ends := readSample(t)
	// Cut the file everywhere: at a record boundary it reads cleanly, elsewhere the
	// records before the cut come back with ErrTruncated.
	for n := range len(b) + 1 {
		got, err := readScalars(bytes.NewReader(b[:n]))
		index, start := recordAt(append(ends, len(b)+1), n)
		want := before(index)
		if n == start {
			if err != nil {
				t.Fatalf("cut at boundary %d: %v", n, err)
			}
		} else if where := fmt.Sprintf("record at offset %d: ", start); !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), where) {
			t.Fatalf("cut at %d: error %v, want ErrTruncated naming %q", n, err, where)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("cut at %d: scalars (-want +got):\n%s", n, diff)
		}
	}
	// Through the file API: a crash in the middle of the last record.
	cut := filepath.Join(t.TempDir(), "cut")
	if err := os.WriteFile(cut, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadScalars(cut)
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), cut) {
		t.Errorf("ReadScalars error %v, want ErrTruncated naming %s", err, cut)
	}
	if diff := cmp.Diff(scalarsOf(samplePoints[:len(samplePoints)-1]), got); diff != "" {
		t.Errorf("ReadScalars of the cut file (-want +got):\n%s", diff)
	}
}

func TestReadScalarsErrors(t *testing.T) {
	// A header whose checksum is right but whose length no file can hold.
	huge := binary.LittleEndian.AppendUint64(nil, math.MaxUint64)
	huge = binary.LittleEndian.AppendUint32(huge, maskedCRC(huge))
	cases := map[string]struct {
		data []byte // written as the events file; nil: no file
		want string
	}{
		"no file": {want: "no such file"},
		"event that does not parse": {
			data: appendRecord(nil, []byte{0x10}),
			want: "record at offset 0: corrupt record: event: message ends inside a field",
		},
		"wall_time that is not a time": {
			data: appendRecord(nil, unhex(t, "09 000000000000f87f 2a 0a 0a 08 0a 01 61 15 0000803f")),
			want: "record at offset 0: corrupt record: wall_time NaN is not a time",
		},
		"length that cannot be": {
			data: huge,
			want: "record at offset 0: corrupt record: length 18446744073709551615 is too large",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events")
			if tc.data != nil {
				if err := os.WriteFile(path, tc.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ReadScalars(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadScalars error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadScalarsEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadScalars(path)
	if err != nil || got != nil {
		t.Errorf("ReadScalars of an empty file = %v, %v; want nothing, no error", got, err)
	}
}
