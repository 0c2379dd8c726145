package workload

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Worker 0 takes a drop request only when it is signed with the gang's secret, unexpired,
// not dated far ahead, and names workers 1 to N-1; it says what is wrong otherwise.
func TestOpenDrop(t *testing.T) {
	secret := []byte("gang secret")
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	good := DropRequest{Workers: []int{3, 2, 3}, Reason: "node b lost", Attempt: 1, Expires: now.Add(DropTTL)}
	sign := func(r DropRequest) ([]byte, string) {
		body, mac, err := SignDrop(secret, r)
		if err != nil {
			t.Fatal(err)
		}
		return body, mac
	}
	body, mac := sign(good)
	got, err := OpenDrop(secret, body, mac, now, 4)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{2, 3}, got.Workers); diff != "" {
		t.Errorf("workers (-want +got, sorted and once each):\n%s", diff)
	}
	with := func(f func(*DropRequest)) DropRequest {
		r := good
		f(&r)
		return r
	}
	for name, tc := range map[string]struct {
		secret []byte
		req    DropRequest
		mac    func(string) string
		want   string
	}{
		"another secret":    {secret: []byte("guess"), req: good, want: "does not verify"},
		"no secret":         {secret: nil, req: good, want: "does not verify"},
		"a MAC not in hex":  {secret: secret, req: good, mac: func(string) string { return "zz" }, want: "does not verify"},
		"another body's":    {secret: secret, req: good, mac: func(string) string { _, m := sign(with(func(r *DropRequest) { r.Attempt = 9 })); return m }, want: "does not verify"},
		"expired":           {secret: secret, req: with(func(r *DropRequest) { r.Expires = now }), want: "expired at 2026-11-28T12:00:00Z"},
		"dated an hour on":  {secret: secret, req: with(func(r *DropRequest) { r.Expires = now.Add(time.Hour) }), want: "too far ahead"},
		"no worker":         {secret: secret, req: with(func(r *DropRequest) { r.Workers = nil }), want: "names no worker"},
		"worker 0":          {secret: secret, req: with(func(r *DropRequest) { r.Workers = []int{0} }), want: "worker 0: give workers 1 to 3"},
		"a worker too many": {secret: secret, req: with(func(r *DropRequest) { r.Workers = []int{1, 4} }), want: "worker 4: give workers 1 to 3"},
	} {
		t.Run(name, func(t *testing.T) {
			body, mac := sign(tc.req)
			if tc.mac != nil {
				mac = tc.mac(mac)
			}
			if _, err := OpenDrop(tc.secret, body, mac, now, 4); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
	// A signed body that is not a request.
	junk := []byte("[1, 2]")
	if _, err := OpenDrop(secret, junk, gangMAC(kindDrop, secret, junk), now, 4); err == nil || !strings.Contains(err.Error(), "the drop request: json") {
		t.Errorf("a signed non-request: %v", err)
	}
}

// A readmit request is signed under its own key: a drop request's body and MAC do not
// open as a readmit, nor a readmit's as a drop, so neither can be replayed as the other.
func TestReadmitIsNotADrop(t *testing.T) {
	secret := []byte("gang secret")
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	r := DropRequest{Workers: []int{2}, Reason: "room found", Attempt: 3, Expires: now.Add(DropTTL)}
	body, mac, err := SignReadmit(secret, r)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenReadmit(secret, body, mac, now, 3); err != nil || !cmp.Equal(got.Workers, []int{2}) {
		t.Fatalf("OpenReadmit: %+v, %v", got, err)
	}
	if _, err := OpenDrop(secret, body, mac, now, 3); err != ErrDropAuth {
		t.Errorf("a readmit opened as a drop: %v; want ErrDropAuth", err)
	}
	dbody, dmac, _ := SignDrop(secret, r)
	if _, err := OpenReadmit(secret, dbody, dmac, now, 3); err != ErrDropAuth {
		t.Errorf("a drop opened as a readmit: %v; want ErrDropAuth", err)
	}
	if _, err := OpenReadmit(secret, body, mac, now, 2); err == nil || err.Error() != "the readmit request names worker 2: give workers 1 to 1" {
		t.Errorf("worker out of range: %v", err)
	}
}
