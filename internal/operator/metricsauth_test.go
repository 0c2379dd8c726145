package operator

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The metrics go to a token the API server authenticates and allows to get the path:
// 401 without one or with one it does not know, 403 when it does not allow it; its
// answers are asked once a minute per token and path.
func TestMetricsAuth(t *testing.T) {
	cs := fake.NewClientset()
	reviews := 0
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "known" || tr.Spec.Token == "reader" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: tr.Spec.Token}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "reader" && na != nil && na.Path == "/metrics" && na.Verb == "get"
		return true, sar, nil
	})
	a := &reviewer{cs: cs, seen: map[[32]byte]review{}}
	h, err := a.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer stranger", 401}, {"Bearer known", 403}, {"Bearer reader", 200}, {"Bearer reader", 200}} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want || (tc.want == 200) != (rec.Body.String() == "metrics") {
			t.Errorf("%q: %d, want %d", tc.auth, rec.Code, tc.want)
		}
	}
	if reviews != 3 {
		t.Errorf("%d TokenReviews for 3 tokens: the answers were not kept", reviews)
	}
}
