package dashboard

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext returns where to go after signing in: a path of this site, else "/". It
// refuses anything a browser could read as another site: a scheme or host, "//" or "/\"
// at the start, and any control character (browsers drop tabs and newlines from URLs, so
// "/\t/evil.example" would become "//evil.example").
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return "/"
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

// loginData is what the sign-in page shows.
type loginData struct {
	Next string
	// Token is set when the page may ask for the token: over TLS, where the browser has
	// checked who answers, and only when the dashboard has a token.
	Token bool
	// Link says how to get a one-time sign-in link.
	Link string
}

func (h *Handler) loginData(r *http.Request, next string) loginData {
	return loginData{Next: safeNext(next), Token: r.TLS != nil && len(h.sessions.token) > 0, Link: h.cfg.SignInHelp}
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusOK, "login.html", page{Title: "Sign in", Data: h.loginData(r, r.URL.Query().Get("next"))})
}

// login signs a browser in with a one-time code (from a sign-in link), or with the token
// over TLS, and sets the session cookie. A right code always signs in: it is checked
// first, so that failures from the same address (every local user's is 127.0.0.1) never
// lock its owner out, and 256 random bits need no throttle. Repeated failures from one
// client slow down everything else it tries, the token above all (see throttle).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	data := h.loginData(r, r.PostFormValue("next"))
	if !sameOrigin(r) {
		h.fail(w, r, http.StatusForbidden, "This sign-in did not come from the dashboard's own page.")
		return
	}
	if code := strings.TrimSpace(r.PostFormValue("code")); code == "" || !h.cfg.SignIns.Redeem(code) {
		client := clientOf(r)
		if wait := h.throttle.blocked(client); wait > 0 {
			secs := strconv.Itoa(int(wait.Seconds() + 0.999))
			w.Header().Set("Retry-After", secs)
			h.render(w, http.StatusTooManyRequests, "login.html", page{Title: "Sign in", Data: data,
				Message: "Too many failed sign-ins from this address: wait " + secs + " s and try again, or open a new sign-in link, which always works. " +
					h.cfg.SignInHelp})
			return
		}
		if msg := h.checkSignIn(r); msg != "" {
			h.throttle.fail(client)
			h.render(w, http.StatusForbidden, "login.html", page{Title: "Sign in", Data: data, Message: msg})
			return
		}
	}
	h.log.Info("dashboard: signed in", "client", r.RemoteAddr)
	h.sessions.setCookie(w, r, h.sessions.issue())
	http.Redirect(w, r, data.Next, http.StatusSeeOther)
}

// checkSignIn returns why the sign-in form's token does not sign in, or "": its code,
// if any, did not (login tried it first).
func (h *Handler) checkSignIn(r *http.Request) string {
	code, token := strings.TrimSpace(r.PostFormValue("code")), strings.TrimSpace(r.PostFormValue("token"))
	switch {
	case code != "":
		return "That sign-in link was used already or has expired (links work once, for 2 minutes). " + h.cfg.SignInHelp
	case token != "" && r.TLS == nil:
		return "This dashboard does not take the token over plain HTTP, where another program could stand in for it. " + h.cfg.SignInHelp
	case token != "" && len(h.sessions.token) > 0 && h.sessions.validToken(token):
		return ""
	case token != "":
		return "That is not this dashboard's token. " + h.cfg.TokenHelp
	}
	return "Open a sign-in link to sign in. " + h.cfg.SignInHelp
}

// clientOf returns the address a request comes from, without its port.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// logout ends the session and clears its cookie.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request, session string) {
	h.sessions.end(session)
	h.sessions.setCookie(w, r, "")
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
