package tfevents

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// Scalar is one point of one curve: the value of Tag at Step.
type Scalar struct {
	Step int64
	// WallTime is when the point was recorded, to within a microsecond (event files hold
	// it as float64 seconds).
	WallTime time.Time
	Tag      string
	// Value is the float32 that the file holds.
	Value float64
}

// ReadScalars returns the scalar summaries of the events file at path, in file order and,
// within an event, in the order the event holds them. It checks both checksums of every
// record and skips events and fields that are not scalars.
//
// On error it also returns the scalars of the records before the failing one. The error
// names that record's offset and wraps ErrTruncated when the file ends inside it (a writer
// that crashed or is still writing) or ErrCorrupt when it is damaged.
func ReadScalars(path string) ([]Scalar, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	scalars, err := readScalars(bufio.NewReader(f))
	if err != nil {
		return scalars, fmt.Errorf("read events %s: %w", path, err)
	}
	return scalars, nil
}

// readScalars reads records from r up to the end or the first bad one.
func readScalars(r io.Reader) ([]Scalar, error) {
	rr := recordReader{r: r}
	var out []Scalar
	for {
		off := rr.off
		data, err := rr.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out, err = appendScalars(out, data)
		if err != nil {
			return out, fmt.Errorf("record at offset %d: %w: %w", off, ErrCorrupt, err)
		}
	}
}

// appendScalars decodes one serialized Event and appends its scalars to out.
func appendScalars(out []Scalar, data []byte) ([]Scalar, error) {
	e, err := decodeEvent(data)
	if err != nil || len(e.summary) == 0 {
		return out, err
	}
	wall, err := wallTime(e.wallTime)
	if err != nil {
		return out, err
	}
	for _, v := range e.summary {
		out = append(out, Scalar{Step: e.step, WallTime: wall, Tag: v.tag, Value: float64(v.simpleValue)})
	}
	return out, nil
}

// wallTime converts seconds since the Unix epoch to a time.
func wallTime(seconds float64) (time.Time, error) {
	if !(math.Abs(seconds) < math.MaxInt64) {
		return time.Time{}, fmt.Errorf("wall_time %v is not a time", seconds)
	}
	whole := math.Floor(seconds)
	nanos := math.Round((seconds - whole) * 1e9)
	return time.Unix(int64(whole), int64(nanos)), nil
}

// wallSeconds converts t to seconds since the Unix epoch, as Event.wall_time holds it.
func wallSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
