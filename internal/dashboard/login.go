package dashboard

import (
	"net/http"
	"net/url"
	"strings"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext returns where to go after signing in: a path of this site, else "/".
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	return next
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusOK, "login.html", page{Title: "Sign in", Data: safeNext(r.URL.Query().Get("next"))})
}

// login checks the token of the sign-in form and sets the session cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := safeNext(r.PostFormValue("next"))
	if !sameOrigin(r) {
		h.fail(w, r, http.StatusForbidden, "This sign-in did not come from the dashboard's own page.")
		return
	}
	if !h.sessions.validToken(strings.TrimSpace(r.PostFormValue("token"))) {
		h.log.Warn("dashboard: a sign-in with a wrong token", "client", r.RemoteAddr)
		h.render(w, http.StatusForbidden, "login.html", page{Title: "Sign in", Data: next,
			Message: "That is not the server's token. It is in the server's token file (by default ~/.config/trainyard/token)."})
		return
	}
	h.log.Info("dashboard: signed in", "client", r.RemoteAddr)
	setCookie(w, r, h.sessions.issue())
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, _ string) {
	setCookie(w, r, "")
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
