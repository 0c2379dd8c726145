package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"golang.org/x/net/websocket"
)

// wsWriter sends what is written to it as WebSocket text messages.
type wsWriter struct{ ws *websocket.Conn }

func (w wsWriter) Write(p []byte) (int, error) {
	if err := websocket.Message.Send(w.ws, strings.ToValidUTF8(string(p), "\uFFFD")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// follow streams a job's log over a WebSocket: its last LogLines lines, then each new
// part as it is written, until the job ends (the server closes the stream) or the page
// goes away. The handshake's Origin must be this site.
func (h *Handler) follow(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("id")
	opts, err := logOptions(r.URL.Query().Get("rank"), LogLines)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	srv := websocket.Server{
		Handshake: func(_ *websocket.Config, req *http.Request) error {
			if req.Header.Get("Origin") == "" || !sameOrigin(req) {
				return errors.New("cross-origin log stream refused")
			}
			return nil
		},
		Handler: func(ws *websocket.Conn) {
			defer ws.Close()
			ctx := r.Context()
			if err := h.cfg.Backend.Follow(ctx, id, wsWriter{ws}, opts); err != nil && ctx.Err() == nil {
				_ = websocket.Message.Send(ws, "\n[trainyard: the log stream ended: "+err.Error()+"]\n")
			}
		},
	}
	srv.ServeHTTP(w, r)
}
