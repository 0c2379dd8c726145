package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/upload"
)

// Kinds of refusal that the server itself finds in a request, besides the domain errors
// of the packages it calls.
var (
	// errInvalid: the request is malformed or asks for something unsupported.
	errInvalid = errors.New("invalid request")
	// errTooLarge: the request body is over its limit.
	errTooLarge = errors.New("request body too large")
	// errMediaType: the request body is of a type the endpoint does not read.
	errMediaType = errors.New("unsupported media type")
	// errNoPackage: no package of that name was uploaded.
	errNoPackage = errors.New("package not found")
	// errNoEndpoint: no endpoint has that method and path.
	errNoEndpoint = errors.New("no such endpoint")
)

// api says which API a handler serves, as the two answer some errors differently.
type api int

const (
	native api = iota
	ray
)

// statusTable is the one table that maps errors to HTTP status codes: the first entry
// whose err matches (errors.Is) gives the status, for the native API or for Ray's. Any
// other error is a 500.
var statusTable = []struct {
	err            error
	native, rayAPI int
}{
	{store.ErrNotFound, http.StatusNotFound, http.StatusNotFound},
	{errNoPackage, http.StatusNotFound, http.StatusNotFound},
	{errNoEndpoint, http.StatusNotFound, http.StatusNotFound},
	// Ray's job agent answers its job manager's ValueError for a submission_id in use
	// with 400, which Ray's dashboard head, the server Ray's clients talk to, turns into
	// a 500 (job_head.py: any other exception of the agent's client). KubeRay's client
	// takes only a 500 for "already submitted".
	{store.ErrExists, http.StatusConflict, http.StatusInternalServerError},
	// Only the native API finds jobs by name, and only its jobs have one.
	{store.ErrNameTaken, http.StatusConflict, http.StatusBadRequest},
	{jobs.ErrAmbiguous, http.StatusConflict, http.StatusBadRequest},
	// Ray answers 500: its job manager raises RuntimeError for a job not yet ended.
	{jobs.ErrNotFinished, http.StatusConflict, http.StatusInternalServerError},
	// Ray's stop answers {"stopped": false} instead; the Ray handler never lets it here.
	{jobs.ErrFinished, http.StatusConflict, http.StatusConflict},
	{jobs.ErrNeverFits, http.StatusBadRequest, http.StatusBadRequest},
	{jobs.ErrSpecTooLarge, http.StatusBadRequest, http.StatusBadRequest},
	{errInvalid, http.StatusBadRequest, http.StatusBadRequest},
	{store.ErrInvalid, http.StatusBadRequest, http.StatusBadRequest},
	{upload.ErrInvalidName, http.StatusBadRequest, http.StatusBadRequest},
	{upload.ErrBadArchive, http.StatusBadRequest, http.StatusBadRequest},
	{errSlowBody, http.StatusRequestTimeout, http.StatusRequestTimeout},
	{errTooLarge, http.StatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge},
	{upload.ErrTooLarge, http.StatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge},
	// A state of the server, not of the request: until jobs are deleted.
	{errQuota, http.StatusInsufficientStorage, http.StatusInsufficientStorage},
	{errMediaType, http.StatusUnsupportedMediaType, http.StatusUnsupportedMediaType},
	{auth.ErrBodyMismatch, http.StatusForbidden, http.StatusForbidden},
}

// statusOf returns the status code that answers err on the given API.
func statusOf(err error, a api) int {
	for _, row := range statusTable {
		if errors.Is(err, row.err) {
			if a == ray {
				return row.rayAPI
			}
			return row.native
		}
	}
	return http.StatusInternalServerError
}

// refusal is an error of one of the kinds above (or a domain error's kind) with a
// message of its own, which is what the client reads. It unwraps to its cause, if any.
type refusal struct {
	kind  error
	msg   string
	cause error
}

// Error returns the message the client reads.
func (e *refusal) Error() string { return e.msg }

// Is makes errors.Is(err, kind) true for the refusal's kind.
func (e *refusal) Is(target error) bool { return target == e.kind }

// Unwrap returns the error that caused the refusal, if any.
func (e *refusal) Unwrap() error { return e.cause }

// refuse returns a refusal of the given kind with a formatted message.
func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// invalid returns a refusal of kind errInvalid with a formatted message.
func invalid(format string, args ...any) error {
	return refuse(errInvalid, format, args...)
}

// invalidBecause returns a refusal of kind errInvalid whose message is cause's.
func invalidBecause(cause error) error {
	return &refusal{kind: errInvalid, msg: cause.Error(), cause: cause}
}

// errorBody is the JSON body of every error the native API answers.
type errorBody struct {
	Error string `json:"error"`
}

// writeError answers err with its status on API a: on Ray's, as Ray's job head does, a
// text/plain body that is the message and nothing else; on the native API, a JSON body
// that holds the message. Server errors (500 and up) are logged too, but for the two
// that Ray answers with 500 on purpose, and a full upload quota.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, a api, err error) {
	status := statusOf(err, a)
	if status >= http.StatusInternalServerError && !errors.Is(err, jobs.ErrNotFinished) && !errors.Is(err, store.ErrExists) &&
		!errors.Is(err, errQuota) { // the quota logs its refusals itself
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if a == ray {
		writeRayError(w, status, err.Error())
		return
	}
	writeJSON(w, status, errorBody{Error: err.Error()})
}

// writeRayError answers msg as Ray's dashboard answers an error: aiohttp's
// Response(text=msg, status=status), whose body is msg exactly, as text/plain in UTF-8.
func writeRayError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", auth.RayErrorContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// isRayPath reports whether path is one of Ray's endpoints, whose errors (the token
// check's too) are written as Ray writes them.
func isRayPath(path string) bool {
	return path == "/api/version" || path == "/api/jobs" ||
		strings.HasPrefix(path, "/api/jobs/") || strings.HasPrefix(path, "/api/packages/")
}
