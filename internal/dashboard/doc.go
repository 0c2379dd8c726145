// Package dashboard is Trainyard's web UI: the job list, a job's page with its attempts,
// ranks and live log, and buttons to stop a job, served as server-rendered pages with a
// little JavaScript, every asset embedded in the binary.
//
// Its data comes from a Backend: the job server's native API through its Go client
// (`trainyard server` serves the dashboard at / on its own port, reaching its API in
// process). Sign-in takes a one-time code from a sign-in link (or the token, over TLS
// only) and sets an HttpOnly, SameSite=Strict session cookie holding a random session ID
// (never the token); every state-changing request carries a CSRF token derived from the
// session, and its Origin, when sent, must be the page's own. A right code always signs
// in, whatever failed before from the same address (every local user's is 127.0.0.1);
// five failures a minute from one address slow down its other tries, the token's above
// all. The pages load nothing from outside the server.
package dashboard
