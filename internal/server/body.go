package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxBodyBytes is the largest JSON (or YAML) request body the server reads; a larger one
// is answered 413.
const MaxBodyBytes = 1 << 20

// readBody reads the request body, at most MaxBodyBytes of it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge(r.ContentLength)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(-1)
	case errors.Is(err, errSlowBody):
		return nil, err
	case err != nil:
		return nil, invalid("read the request body: %v", err)
	}
	return data, nil
}

// tooLarge refuses a body of size bytes (-1: unknown).
func tooLarge(size int64) error {
	if size < 0 {
		return refuse(errTooLarge, "the request body is over %d bytes, the most this server reads", MaxBodyBytes)
	}
	return refuse(errTooLarge, "the request body is %d bytes; this server reads at most %d", size, MaxBodyBytes)
}

// decodeStrict decodes a JSON document into v, refusing unknown fields and anything
// after the document.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("the body is not valid JSON for this endpoint: %s", jsonProblem(err))
	}
	if dec.More() {
		return invalid("the body holds more than one JSON document")
	}
	return nil
}

// jsonProblem rewrites a decoding error without the "json: " prefix, naming the field of
// a type error.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: expected %s, got %s", te.Field, te.Type, te.Value)
	}
	if errors.Is(err, io.EOF) {
		return "the body is empty"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// writeJSON answers v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(errorBody{Error: "encode the response: " + err.Error()})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// writeText answers text as text/plain with status 200.
func writeText(w http.ResponseWriter, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, text)
}
