package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// A record is how a job is stored under its ID: the job as JSON without its two JSON
// blobs, then the blobs as given, so that reading a job does not parse its spec (which is
// most of its size, and most of the time List would spend):
//
//	version byte (recordV1)
//	uvarint length, then the JSON of the job with Spec and RuntimeEnv left out
//	uvarint length, then Spec
//	RuntimeEnv (the rest)
const recordV1 = 1

// errCorrupt: a record does not follow the layout above.
var errCorrupt = errors.New("corrupt record")

// encodeRecord returns the job's record.
func encodeRecord(j *Job) ([]byte, error) {
	head := *j
	head.Spec, head.RuntimeEnv = nil, nil
	hb, err := json.Marshal(&head)
	if err != nil {
		return nil, fmt.Errorf("encode job %q: %w", j.ID, err)
	}
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(hb)+len(j.Spec)+len(j.RuntimeEnv))
	b = append(b, recordV1)
	b = binary.AppendUvarint(b, uint64(len(hb)))
	b = append(b, hb...)
	b = binary.AppendUvarint(b, uint64(len(j.Spec)))
	b = append(b, j.Spec...)
	return append(b, j.RuntimeEnv...), nil
}

// decodeRecord parses a stored record. The bytes belong to a transaction, so what the Job
// keeps is copied.
func decodeRecord(id string, b []byte) (*Job, error) {
	if len(b) == 0 || b[0] != recordV1 {
		return nil, fmt.Errorf("decode job %q: unknown record version: %w", id, errCorrupt)
	}
	hb, rest, err := cutLen(b[1:])
	if err != nil {
		return nil, fmt.Errorf("decode job %q: %w", id, err)
	}
	spec, env, err := cutLen(rest)
	if err != nil {
		return nil, fmt.Errorf("decode job %q: %w", id, err)
	}
	j := new(Job)
	if err := json.Unmarshal(hb, j); err != nil {
		return nil, fmt.Errorf("decode job %q: %w", id, err)
	}
	j.Spec = json.RawMessage(clone(spec))
	j.RuntimeEnv = json.RawMessage(clone(env))
	return j, nil
}

// cutLen splits b after a uvarint length and that many bytes.
func cutLen(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errCorrupt
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// clone copies b, and returns nil for an empty b (an unset RuntimeEnv stays nil).
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
