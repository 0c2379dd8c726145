package auth

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// serverToken is the token of the server under test.
const serverToken = "Zm9vYmFyLXRva2VuLWZvci10ZXN0cy1vbmx5LTAxMjM0NTY3"

// testOptions are the options of the server under test.
var testOptions = Options{
	ListenAddr:  "127.0.0.1:8265",
	AllowHosts:  []string{"gpu-box.lan", "Trainyard.Example:443"},
	ExemptPaths: []string{HealthPath},
}

// request describes one request to the middleware.
type request struct {
	method, target, host string
	header               map[string]string
}

// response is what the middleware did with a request.
type response struct {
	Status    int
	Passed    bool   // reached the next handler
	Error     string // the "error" of the JSON body
	WWWAuth   string
	JSONReply bool
}

func TestMiddleware(t *testing.T) {
	bearer := map[string]string{"Authorization": "Bearer " + serverToken}
	ok := response{Status: http.StatusOK, Passed: true}
	missing := response{Status: http.StatusUnauthorized, Error: "missing token: " + tokenHint,
		WWWAuth: `Bearer realm="trainyard"`, JSONReply: true}
	wrong := response{Status: http.StatusForbidden, Error: "invalid token: it does not match the server's token; " +
		"use the one in the server's token file (by default ~/.config/trainyard/token or $TRAINYARD_TOKEN_FILE)",
		JSONReply: true}
	cases := map[string]struct {
		req  request
		want response
	}{
		"no token":                {request{"GET", "/api/jobs/", "localhost:8265", nil}, missing},
		"wrong token":             {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Bearer nope"}}, wrong},
		"wrong Ray token":         {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"X-Ray-Authorization": "Bearer nope"}}, wrong},
		"token with a suffix":     {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Bearer " + serverToken + "x"}}, wrong},
		"token prefix":            {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Bearer " + serverToken[:10]}}, wrong},
		"Authorization":           {request{"POST", "/api/jobs/", "localhost:8265", bearer}, ok},
		"X-Ray-Authorization":     {request{"POST", "/api/jobs/", "localhost:8265", map[string]string{"X-Ray-Authorization": "Bearer " + serverToken}}, ok},
		"lower-case bearer":       {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "bearer " + serverToken}}, ok},
		"upper-case BEARER":       {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "BEARER " + serverToken}}, ok},
		"two spaces":              {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Bearer  " + serverToken}}, ok},
		"proxy Basic plus Ray":    {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Basic dTpw", "X-Ray-Authorization": "Bearer " + serverToken}}, ok},
		"wrong plus right":        {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Bearer nope", "X-Ray-Authorization": "Bearer " + serverToken}}, ok},
		"/metrics needs token":    {request{"GET", "/metrics", "localhost:8265", nil}, missing},
		"/metrics with token":     {request{"GET", "/metrics", "localhost:8265", bearer}, ok},
		"health check":            {request{"GET", "/healthz", "localhost:8265", nil}, ok},
		"health check HEAD":       {request{"HEAD", "/healthz", "localhost:8265", nil}, ok},
		"POST to health check":    {request{"POST", "/healthz", "localhost:8265", nil}, missing},
		"health check subpath":    {request{"GET", "/healthz/x", "localhost:8265", nil}, missing},
		"health check slash":      {request{"GET", "/healthz/", "localhost:8265", nil}, missing},
		"health check dot-dot":    {request{"GET", "/healthz/../api/jobs/", "localhost:8265", nil}, missing},
		"host without port":       {request{"GET", "/api/jobs/", "localhost", bearer}, ok},
		"host upper case":         {request{"GET", "/api/jobs/", "LocalHost:8265", bearer}, ok},
		"host trailing dot":       {request{"GET", "/api/jobs/", "localhost.:8265", bearer}, ok},
		"127.0.0.1 other port":    {request{"GET", "/api/jobs/", "127.0.0.1:9999", bearer}, ok},
		"IPv6 loopback":           {request{"GET", "/api/jobs/", "[::1]", bearer}, ok},
		"IPv6 loopback with port": {request{"GET", "/api/jobs/", "[::1]:8265", bearer}, ok},
		"IPv6 long form":          {request{"GET", "/api/jobs/", "[0:0:0:0:0:0:0:1]:8265", bearer}, ok},
		"allowed host":            {request{"GET", "/api/jobs/", "gpu-box.lan:8265", bearer}, ok},
		"allowed host, any port":  {request{"GET", "/api/jobs/", "trainyard.example:8265", bearer}, ok},
		"foreign host": {request{"GET", "/api/jobs/", "evil.example", bearer}, response{Status: http.StatusForbidden,
			Error: `Host "evil.example" is not allowed; the server answers only requests addressed to localhost, ` +
				`127.0.0.1, [::1] or its listen address, to defend against DNS rebinding; to reach it by this name, ` +
				`start the server with --allow-host evil.example`, JSONReply: true}},
		"foreign host with port": {request{"GET", "/api/jobs/", "evil.example:8265", bearer}, hostRefused("evil.example:8265", "evil.example")},
		"foreign host, health":   {request{"GET", "/healthz", "evil.example", nil}, hostRefused("evil.example", "evil.example")},
		"localhost subdomain":    {request{"GET", "/api/jobs/", "localhost.evil.example", bearer}, hostRefused("localhost.evil.example", "localhost.evil.example")},
		"foreign IP":             {request{"GET", "/api/jobs/", "10.1.2.3:8265", bearer}, hostRefused("10.1.2.3:8265", "10.1.2.3")},
		"userinfo in host":       {request{"GET", "/api/jobs/", "localhost@evil.example", bearer}, hostRefused("localhost@evil.example", "localhost@evil.example")},
		"bad port":               {request{"GET", "/api/jobs/", "localhost:80x", bearer}, hostRefused("localhost:80x", "localhost:80x")},
		"no host": {request{"GET", "/api/jobs/", "", bearer}, response{Status: http.StatusForbidden,
			Error: "the request has no Host header; send one that names the server, such as localhost", JSONReply: true}},
		"token in query": {request{"GET", "/api/jobs/?token=" + serverToken, "localhost:8265", nil}, response{
			Status: http.StatusUnauthorized, WWWAuth: `Bearer realm="trainyard"`, JSONReply: true,
			Error: "missing token: tokens in the URL are not accepted, as URLs end up in logs; " + tokenHint}},
		"access_token in query": {request{"GET", "/api/jobs/?access_token=" + serverToken, "localhost:8265", nil}, response{
			Status: http.StatusUnauthorized, WWWAuth: `Bearer realm="trainyard"`, JSONReply: true,
			Error: "missing token: tokens in the URL are not accepted, as URLs end up in logs; " + tokenHint}},
		"Basic only": {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Basic dTpw"}}, response{
			Status: http.StatusUnauthorized, WWWAuth: `Bearer realm="trainyard"`, JSONReply: true,
			Error: "missing token: the Authorization header does not hold a Bearer token; " + tokenHint}},
		"Bearer without token": {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": "Bearer "}}, response{
			Status: http.StatusUnauthorized, WWWAuth: `Bearer realm="trainyard"`, JSONReply: true,
			Error: "missing token: the Authorization header does not hold a Bearer token; " + tokenHint}},
		"token without scheme": {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Authorization": serverToken}}, response{
			Status: http.StatusUnauthorized, WWWAuth: `Bearer realm="trainyard"`, JSONReply: true,
			Error: "missing token: the Authorization header does not hold a Bearer token; " + tokenHint}},
		"token in cookie": {request{"GET", "/api/jobs/", "localhost:8265", map[string]string{"Cookie": "ray-authentication-token=" + serverToken}}, missing},
	}
	h := Middleware(serverToken, testOptions, okHandler())
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := serve(t, h, tc.req)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMiddlewareListenAddress(t *testing.T) {
	cases := map[string]struct {
		opts Options
		host string
		want int
	}{
		"own address":            {Options{ListenAddr: "192.168.1.5:8265"}, "192.168.1.5:8265", http.StatusOK},
		"own name":               {Options{ListenAddr: "gpu-box:8265"}, "GPU-BOX:8265", http.StatusOK},
		"own IPv6 address":       {Options{ListenAddr: "[fd00::5]:8265"}, "[fd00:0::5]:8265", http.StatusOK},
		"other address":          {Options{ListenAddr: "192.168.1.5:8265"}, "192.168.1.6:8265", http.StatusForbidden},
		"all interfaces, any IP": {Options{ListenAddr: "0.0.0.0:8265"}, "10.0.0.7:8265", http.StatusOK},
		"::, any IPv6":           {Options{ListenAddr: "[::]:8265"}, "[fd00::7]:8265", http.StatusOK},
		"empty host, any IP":     {Options{ListenAddr: ":8265"}, "10.0.0.7", http.StatusOK},
		"all interfaces, a name": {Options{ListenAddr: "0.0.0.0:8265"}, "evil.example:8265", http.StatusForbidden},
		"zero Options, loopback": {Options{}, "127.0.0.1:1234", http.StatusOK},
		"zero Options, name":     {Options{}, "gpu-box", http.StatusForbidden},
		"allow any host":         {Options{AllowHosts: []string{"*"}}, "evil.example", http.StatusOK},
		"allowed IPv6 literal":   {Options{AllowHosts: []string{"[fd00::9]:8265"}}, "[fd00::9]", http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := Middleware(serverToken, tc.opts, okHandler())
			req := request{"GET", "/api/jobs/", tc.host, map[string]string{"Authorization": "Bearer " + serverToken}}
			if diff := cmp.Diff(tc.want, serve(t, h, req).Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMiddlewareRealServer sends requests over a real connection, as a client sets Host
// itself.
func TestMiddlewareRealServer(t *testing.T) {
	srv := httptest.NewServer(Middleware(serverToken, Options{ExemptPaths: []string{HealthPath}}, okHandler()))
	defer srv.Close()
	cases := map[string]struct {
		path, auth string
		want       int
	}{
		"token":        {"/api/jobs/", "Bearer " + serverToken, http.StatusOK},
		"no token":     {"/api/jobs/", "", http.StatusUnauthorized},
		"wrong token":  {"/api/jobs/", "Bearer x", http.StatusForbidden},
		"health check": {"/healthz", "", http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest("GET", srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if diff := cmp.Diff(tc.want, resp.StatusCode); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMiddlewareEmptyTokenPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Middleware with an empty token did not panic")
		}
	}()
	Middleware("", Options{}, okHandler())
}

// hostRefused is the response to a request whose Host header is host, named name.
func hostRefused(host, name string) response {
	return response{Status: http.StatusForbidden, JSONReply: true,
		Error: `Host "` + host + `" is not allowed; the server answers only requests addressed to localhost, ` +
			`127.0.0.1, [::1] or its listen address, to defend against DNS rebinding; to reach it by this name, ` +
			`start the server with --allow-host ` + name}
}

// okHandler answers 200 with "ok".
func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Passed", "1")
		_, _ = io.WriteString(w, "ok")
	})
}

// serve sends req to h and describes the response.
func serve(t *testing.T, h http.Handler, req request) response {
	t.Helper()
	r := httptest.NewRequest(req.method, req.target, nil)
	r.Host = req.host
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	got := response{Status: rec.Code, Passed: rec.Header().Get("X-Passed") == "1",
		WWWAuth: rec.Header().Get("WWW-Authenticate")}
	if rec.Header().Get("Content-Type") == "application/json" {
		got.JSONReply = true
		var body map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("error body %q: %v", rec.Body, err)
		}
		if len(body) != 1 || strings.TrimSpace(body["error"]) == "" {
			t.Errorf("error body %q: want exactly one non-empty field, error", rec.Body)
		}
		got.Error = body["error"]
	}
	return got
}

// On Ray's paths (Options.RayPath), refusals are written as Ray's token middleware writes
// them: text/plain, Ray's words, the same status; OnRefuse still gets the full reason.
// Other paths keep the JSON error.
func TestMiddlewareRayRefusals(t *testing.T) {
	var reasons []string
	opts := testOptions
	opts.RayPath = func(p string) bool { return strings.HasPrefix(p, "/api/jobs") }
	opts.OnRefuse = func(_ *http.Request, _ int, reason string) { reasons = append(reasons, reason) }
	h := Middleware(serverToken, opts, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	cases := map[string]struct {
		path, host, header string
		status             int
		contentType, body  string
	}{
		"missing": {"/api/jobs/", "localhost:8265", "", http.StatusUnauthorized, RayErrorContentType, RayMissingToken},
		"wrong":   {"/api/jobs/x", "localhost:8265", "Bearer nope", http.StatusForbidden, RayErrorContentType, RayInvalidToken},
		"foreign Host": {"/api/jobs/", "evil.example", "Bearer " + serverToken, http.StatusForbidden, RayErrorContentType,
			"Forbidden: Host \"evil.example\" is not allowed; "},
		"native path": {"/api/v1/jobs", "localhost:8265", "", http.StatusUnauthorized, "application/json", `{"error":"missing token: `},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			reasons = nil
			req := httptest.NewRequest("GET", c.path, nil)
			req.Host = c.host
			if c.header != "" {
				req.Header.Set(HeaderRayAuthorization, c.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != c.status || rec.Header().Get("Content-Type") != c.contentType {
				t.Errorf("%d %q, want %d %q", rec.Code, rec.Header().Get("Content-Type"), c.status, c.contentType)
			}
			exact := c.status == http.StatusUnauthorized && c.contentType == RayErrorContentType || c.body == RayInvalidToken
			if exact && body != c.body || !strings.HasPrefix(body, c.body) {
				t.Errorf("body %q, want %q (exactly: %v)", body, c.body, exact)
			}
			if len(reasons) != 1 || strings.HasPrefix(reasons[0], "Forbidden") || strings.HasPrefix(reasons[0], "Unauthorized") {
				t.Errorf("OnRefuse got %q, want our own reason once", reasons)
			}
		})
	}
}
