package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/store"
)

// A job whose spec its supervisor would refuse (over jobspec.MaxFileSize as YAML) is
// refused at submit with 400 and a message that names the limit, on both APIs, though
// its request body is within MaxBodyBytes; nothing is stored.
func TestSubmitRefusesASpecTooLargeToRun(t *testing.T) {
	e := newEnv(t)
	limit := strconv.Itoa(jobspec.MaxFileSize) + " bytes"

	vars := make(map[string]string, 40_000)
	for i := range 40_000 {
		vars[fmt.Sprintf("V%05d", i)] = "x"
	}
	body := jsonBody(t, map[string]any{"entrypoint": "true", "submission_id": "ray-big",
		"runtime_env": map[string]any{"env_vars": vars}})
	if len(body) > MaxBodyBytes {
		t.Fatalf("the Ray body is %d bytes, over the body limit: the test would not reach the spec's", len(body))
	}
	r := e.request("POST", "/api/jobs/", body)
	wantStatus(t, r, http.StatusBadRequest)
	if msg := errorMessage(t, r); !strings.Contains(msg, limit) || !strings.Contains(msg, "spec") {
		t.Errorf("Ray's refusal %q does not name the spec's limit, %s", msg, limit)
	}

	// YAML doubles a single quote in a quoted value, so this 600 kB body makes 1.2 MB.
	quotes := strings.Repeat("'", 600_000)
	native := fmt.Sprintf(`{"id": "native-big", "job": %s}`, trainJob("true", fmt.Sprintf(`"env": [{"name": "Q", "value": %q}]`, quotes)))
	r = e.request("POST", "/api/v1/jobs", []byte(native))
	wantStatus(t, r, http.StatusBadRequest)
	if msg := errorMessage(t, r); !strings.Contains(msg, limit) || !strings.Contains(msg, "spec") {
		t.Errorf("the native refusal %q does not name the spec's limit, %s", msg, limit)
	}

	for _, id := range []string{"ray-big", "native-big"} {
		if _, err := e.svc.Get(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("job %s was stored: %v", id, err)
		}
	}
}
