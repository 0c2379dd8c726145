// Package auth keeps the job server closed to everyone but its owner: a bearer token that
// every request must carry, a check of the Host header against DNS rebinding, and a warning
// when the server would send the token over the network in clear text.
//
// Ray's job API has no authentication by default, which let anyone who could reach port
// 8265 run code on the cluster (CVE-2023-48022, "ShadowRay"). Trainyard's server instead
// refuses every request without the token and listens on loopback unless told otherwise.
//
// # The token
//
// The token is 32 random bytes from crypto/rand, written as unpadded base64url (43
// characters) on one line of the token file: $TRAINYARD_TOKEN_FILE, else
// $XDG_CONFIG_HOME/trainyard/token, else ~/.config/trainyard/token (DefaultTokenPath).
// The server calls LoadOrCreate when it starts: the first start makes the file (its folder
// 0700, the file 0600), later starts reuse it, and two servers starting at once agree on
// one token. The CLI, on the same machine, calls Load to find the token by itself.
//
// Like ssh with its keys, both refuse a token file that group or others may read or write,
// or that is owned by another user, and say how to fix it; they also refuse an empty or
// malformed file rather than run with a weak or accidental token. A token a user writes
// into the file by hand must be at least 32 characters of the Bearer token alphabet
// (letters, digits and - . _ ~ + /, then optional =).
//
// # Which servers a token file belongs to
//
// A server that starts adds the address it listens on (its host as given, with the port
// it got) to the servers file beside the token file, <token file>.servers (mode 0600,
// checked as the token file is; the last 16 addresses). The CLI sends the token it finds
// by itself only to those addresses (Owners.Allows): the same host and port, or a
// loopback address on the port of a server listening on all interfaces. A token file
// without a servers file, from before they existed, belongs to DefaultListen
// (127.0.0.1:8265) alone, until a server starts with it. A token the user gives
// (--token-file, $TRAINYARD_TOKEN) goes wherever the user points it. The token file
// itself stays one line, so that Ray's clients can read it (RAY_AUTH_TOKEN_PATH).
//
// # Proofs instead of the token
//
// The trainyard CLI never sends the token. It proves that it holds it, and only after the
// server has proved the same, so that whatever listens on a recorded port when the server
// is down (another user's program, say) learns nothing it can use, and a relay between the
// two (one that holds a recorded port while the server listens on another, and passes
// the bytes on) gets no session at all:
//
//  1. The client posts a fresh random nonce to ChallengePath (no token needed). The server
//     answers a session ID (its issue time, random bytes and a MAC under a key of this
//     server process, so it is valid at no other process and dies with this one) and
//     ServerProof: an HMAC-SHA256 under the token of the nonce, the ID and the address
//     its connection arrived at (ConnAddr of the connection's local end: "ip:port").
//     The client checks it against the address its own connection reached (the remote
//     end, read as the connection is made). A relay at another address passes on a proof
//     for the server's address, which fails there; the client stops and names both
//     (client.ErrNotTheServer): it has sent a nonce, nothing more. A port forward must
//     therefore keep the IP address and the port (ssh -L 8265:127.0.0.1:8265 works; a
//     forward to another port, a NAT, an HTTP proxy or a TLS-terminating proxy do not).
//  2. Both ends derive the session key, SessionKey, an HMAC under the token of the nonce and
//     the ID; it never travels. Every request carries "Authorization: Trainyard-Proof
//     session=..., nonce=..., seq=N, body=<SHA-256>, sig=..." where sig is an HMAC under
//     the session key of the method, the request URI as sent, N and the body's hash.
//  3. The server checks the ID, the signature, that the body is the one signed (at once for
//     bodies up to 1 MiB; a longer one, a package upload, fails its reader at the end with
//     ErrBodyMismatch, before the handler acts), and that N was not used in the session
//     (a window of 1,024 numbers, for requests that overtake each other). N may be at
//     most 65,536 above the highest number the session used: one further ahead (2^64-1,
//     say) is refused as stale, so that it never moves the window past the numbers the
//     client still uses. The server remembers up to 4,096 sessions that signed a request;
//     a full table forgets the oldest and refuses, from then on, any session issued no
//     later, so forgetting never reopens a replay. Sessions last SessionLifetime (an
//     hour); a refused stale session is answered 401 with WWW-Authenticate:
//     Trainyard-Proof error="stale", and the client starts a new one.
//
// # Secrets in answers: the sign-in code
//
// Answers are not encrypted, so a secret in one is sealed to the request that asked for
// it (Seal): AES-256-GCM under a key derived from the request's session key, which only
// the client that started the session and the server know. A request with the token
// itself (Bearer) has its answer sealed under BearerKey, derived from the token. The one
// secret the API answers is a dashboard sign-in code (SignInPath, SealedSignIn): the
// client opens it (OpenSealed) and only then makes the link, LoginPath + "#code=...",
// which it prints or hands to the browser on its own machine. Whoever sees the answer on
// the way sees a sealed code that signs nobody in; the code itself crosses the network
// only from the browser to the dashboard, once.
//
// Answers are not signed, nor encrypted but for sealed secrets: over a network that others
// can read or change, use TLS as well. Ray's
// clients, curl and the server's own dashboard in process send the token itself (Bearer,
// below), as Ray's protocol has it.
//
// # Requests
//
// Middleware checks, in this order, for every request:
//
//  1. The Host header names this server: localhost, 127.0.0.1, [::1], the listen address,
//     or a name given with Options.AllowHosts (--allow-host); any port. Otherwise 403: a
//     web page whose own name was re-pointed at 127.0.0.1 (DNS rebinding) reaches the
//     server with the page's name in Host, and is stopped here. A server listening on all
//     interfaces (0.0.0.0, ::) also accepts any IP address as Host, as a browser sends an
//     IP address only to the server that really has it.
//  2. GET and HEAD requests for an exempt path (Options.ExemptPaths, exact match) pass
//     without a token. The server exempts only its health check, HealthPath ("/healthz"),
//     which must say nothing but that the server is up; /metrics is not exempt, as its
//     numbers tell about the jobs.
//  3. A proof in a session (above), or the token, in "Authorization: Bearer <token>" or in Ray's
//     "X-Ray-Authorization: Bearer <token>" (which Ray clients send through proxies that
//     use Authorization themselves), compared in constant time. The scheme name is
//     case-insensitive ("bearer" works), as RFC 7235 says. Tokens in the URL query or in
//     cookies are never accepted: URLs end up in logs and browser history, and a cookie
//     would let other web pages send requests with it (CSRF).
//
// A request without a token gets 401 Unauthorized (with WWW-Authenticate: Bearer); a
// request with a wrong token gets 403 Forbidden, as Ray's own token check answers, so that
// Ray's clients print "Authentication failed" for it. Every refusal has a JSON body
// {"error": "..."} that says what to do.
//
// # Listening
//
// The token travels in every request, so CheckListen warns when the server would listen
// on a non-loopback address without TLS.
package auth
