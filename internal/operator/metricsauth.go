package operator

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics are served to those the API server authenticates (a TokenReview of their
// bearer token) and allows to get the path (a SubjectAccessReview), as controller-runtime's
// filters.WithAuthenticationAndAuthorization does; that one pulls k8s.io/apiserver into
// the binary (10 MB more, in every worker pod's init container), this one client-go only.

// reviewTTL is how long an answer of the API server about a token stands.
const reviewTTL = time.Minute

// reviewCacheMax bounds the answers kept; the cache is emptied when it is full.
const reviewCacheMax = 1024

// metricsAuth is a metricsserver.FilterProvider: 401 without a token the API server
// authenticates, 403 when it does not allow the request, else the metrics.
func metricsAuth(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	a := &reviewer{cs: cs, seen: map[[32]byte]review{}}
	return a.filter, nil
}

// filter serves next to the requests whose token the API server authenticates and allows.
func (a *reviewer) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		code, err := a.check(r, strings.TrimSpace(token))
		if err != nil {
			log.Error(err, "metrics: cannot review a request")
		}
		if code != http.StatusOK {
			http.Error(w, http.StatusText(code), code)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// reviewer asks the API server about tokens and remembers its answers for reviewTTL.
type reviewer struct {
	cs   kubernetes.Interface
	mu   sync.Mutex
	seen map[[32]byte]review
}

// review is an answer: the status code for a token's request of a path.
type review struct {
	code int
	at   time.Time
}

// check returns 200, 401 or 403 for a request with token (500 when the API server cannot
// be asked, which is not remembered).
func (a *reviewer) check(r *http.Request, token string) (int, error) {
	key := sha256.Sum256([]byte(r.Method + " " + r.URL.Path + "\x00" + token))
	a.mu.Lock()
	if v, ok := a.seen[key]; ok && time.Since(v.at) < reviewTTL {
		a.mu.Unlock()
		return v.code, nil
	}
	a.mu.Unlock()
	code, err := a.ask(r, token)
	if err != nil {
		return http.StatusInternalServerError, err
	}
	a.mu.Lock()
	if len(a.seen) >= reviewCacheMax {
		clear(a.seen)
	}
	a.seen[key] = review{code: code, at: time.Now()}
	a.mu.Unlock()
	return code, nil
}

// ask makes the TokenReview and the SubjectAccessReview.
func (a *reviewer) ask(r *http.Request, token string) (int, error) {
	ctx := r.Context()
	tr, err := a.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}
