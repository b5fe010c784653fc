package mcpserve

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler is srv's streamable HTTP endpoint, answering only requests that
// carry "Authorization: Bearer TOKEN" (compared in constant time); others
// get 401 before the MCP handler sees them.
func Handler(srv *mcp.Server, token string) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="capsem"`)
			http.Error(w, "capsem mcp serve: a bearer token is required (Authorization: Bearer TOKEN, the token capsem mcp serve printed or was given)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP serves srv on ln until ctx ends.
func ServeHTTP(ctx context.Context, ln net.Listener, srv *mcp.Server, token string, log *slog.Logger) error {
	hs := &http.Server{Handler: Handler(srv, token), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
