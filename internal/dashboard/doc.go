// Package dashboard is Trainyard's web UI: the job list, a job's page with its attempts,
// ranks and live log, and buttons to stop a job, served as server-rendered pages with a
// little JavaScript, every asset embedded in the binary.
//
// Its data comes from a Backend: the job server's native API through its Go client
// (`trainyard server` serves the dashboard at / on its own port, reaching its API in
// process). Sign-in takes the server's token once and sets an HttpOnly, SameSite=Strict
// session cookie holding a MAC of an issue time under the token (never the token
// itself); every state-changing request carries a CSRF token derived from the session,
// and its Origin, when sent, must be the page's own. The pages load nothing from outside
// the server.
package dashboard
