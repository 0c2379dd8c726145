package workload

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// An elastic gang shrinks in place: when the operator gives up on workers that cannot be
// scheduled (their node is lost), it asks worker 0 to go on without them (a DropRequest,
// POSTed to DropPath on ProgressPort), and the gang's coordinator starts its next attempt
// with the other workers, on their pods (internal/gang's Coordinator.Drop).
//
// The request is signed with the gang's secret (the job's gang Secret, EnvGangSecret),
// which the operator can read: HMAC-SHA256 under a key derived from it, over the body, in
// the DropMACHeader header. It expires, and names the attempt it was made for, so that an
// old request replayed later drops nothing.

// The gang grows back in place the same way: once there is room, the operator asks
// worker 0 to take dropped workers back (the same request, POSTed to ReadmitPath and
// signed under another key, so that neither can be replayed as the other), then makes
// their pods (internal/gang's Coordinator.Readmit).

const (
	// DropPath is where worker 0 takes DropRequests, on ProgressPort.
	DropPath = "/gang/drop"
	// ReadmitPath is where worker 0 takes the requests to readmit dropped workers.
	ReadmitPath = "/gang/readmit"
	// DropMACHeader carries a DropRequest's MAC, in hex.
	DropMACHeader = "X-Trainyard-Gang-MAC"
	// DropMaxBody bounds a DropRequest's body.
	DropMaxBody = 16 << 10
	// DropTTL is how long a DropRequest is valid after it is made.
	DropTTL = time.Minute
)

// DropRequest asks worker 0 to go on without some workers, or (at ReadmitPath) to take
// dropped workers back.
type DropRequest struct {
	// Workers are the worker indices to drop or readmit (never 0).
	Workers []int `json:"workers"`
	// Reason says why, for the pod log: "node b lost; worker 2 cannot be scheduled for 30s".
	Reason string `json:"reason"`
	// Attempt is the attempt the operator saw the gang in (status.attempt): worker 0
	// refuses a request for an attempt before its own.
	Attempt int `json:"attempt"`
	// Expires is when the request stops being valid (UTC).
	Expires time.Time `json:"expires"`
}

// DropReply is worker 0's answer: the workers dropped so far, how many the gang runs
// with now and the attempt it is in (the one the workers left start next, when it waited
// for those dropped); or why it did not drop them (Error).
type DropReply struct {
	Dropped []int  `json:"dropped,omitempty"`
	Workers int    `json:"workers,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Error   string `json:"error,omitempty"`
}

// The two kinds of requests: each is signed under its own key.
const (
	kindDrop    = "drop"
	kindReadmit = "readmit"
)

// SignDrop returns r's body and its MAC under the gang's secret, as a drop request.
func SignDrop(secret []byte, r DropRequest) (body []byte, mac string, err error) {
	return sign(kindDrop, secret, r)
}

// SignReadmit returns r's body and its MAC under the gang's secret, as a readmit request.
func SignReadmit(secret []byte, r DropRequest) (body []byte, mac string, err error) {
	return sign(kindReadmit, secret, r)
}

func sign(kind string, secret []byte, r DropRequest) (body []byte, mac string, err error) {
	body, err = json.Marshal(r)
	if err != nil {
		return nil, "", fmt.Errorf("encode the %s request: %w", kind, err)
	}
	return body, gangMAC(kind, secret, body), nil
}

// ErrDropAuth marks a DropRequest whose MAC does not verify.
var ErrDropAuth = errors.New("the request's MAC does not verify under the gang's secret")

// OpenDrop verifies a drop request's body against its MAC and checks it at now: signed,
// unexpired, at most DropTTL ahead, naming workers 1 to workers-1.
func OpenDrop(secret, body []byte, mac string, now time.Time, workers int) (DropRequest, error) {
	return open(kindDrop, secret, body, mac, now, workers)
}

// OpenReadmit is OpenDrop for a readmit request.
func OpenReadmit(secret, body []byte, mac string, now time.Time, workers int) (DropRequest, error) {
	return open(kindReadmit, secret, body, mac, now, workers)
}

func open(kind string, secret, body []byte, mac string, now time.Time, workers int) (DropRequest, error) {
	got, err := hex.DecodeString(mac)
	if len(secret) == 0 || err != nil || !hmac.Equal(got, gangMACBytes(kind, secret, body)) {
		return DropRequest{}, ErrDropAuth
	}
	var r DropRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return DropRequest{}, fmt.Errorf("the %s request: %w", kind, err)
	}
	switch {
	case !now.Before(r.Expires):
		return DropRequest{}, fmt.Errorf("the %s request expired at %s", kind, r.Expires.Format(time.RFC3339))
	case r.Expires.After(now.Add(DropTTL + time.Minute)): // a minute of clock skew
		return DropRequest{}, fmt.Errorf("the %s request expires at %s, too far ahead", kind, r.Expires.Format(time.RFC3339))
	case len(r.Workers) == 0:
		return DropRequest{}, fmt.Errorf("the %s request names no worker", kind)
	}
	for _, w := range r.Workers {
		if w < 1 || w >= workers {
			return DropRequest{}, fmt.Errorf("the %s request names worker %d: give workers 1 to %d", kind, w, workers-1)
		}
	}
	r.Workers = slices.Compact(slices.Sorted(slices.Values(r.Workers)))
	return r, nil
}

func gangMAC(kind string, secret, body []byte) string {
	return hex.EncodeToString(gangMACBytes(kind, secret, body))
}

// gangMACBytes is HMAC-SHA256 over body under a key derived from the gang's secret for
// requests of that kind alone (the gang's links use other keys).
func gangMACBytes(kind string, secret, body []byte) []byte {
	k := hmac.New(sha256.New, secret)
	k.Write([]byte("trainyard gang " + kind + " v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write(body)
	return m.Sum(nil)
}
