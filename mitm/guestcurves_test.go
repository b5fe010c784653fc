package mitm

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// The guest's leg takes a classical key exchange when the guest offers one
// and the hybrid only from a guest that offers nothing else, over TLS and
// over QUIC.
func TestGuestKeyExchange(t *testing.T) {
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
	for _, tc := range []struct {
		name  string
		offer []tls.CurveID
		want  tls.CurveID
		why   string
	}{
		{"Go's defaults", nil, tls.X25519, "the hybrid offered first with X25519 beside it: the leg that crosses no network takes X25519"},
		{"hybrid only", []tls.CurveID{tls.X25519MLKEM768}, tls.X25519MLKEM768, "a guest that offers only post-quantum groups is still served"},
		{"P-256 only", []tls.CurveID{tls.CurveP256}, tls.CurveP256, "an older client's one curve"},
	} {
		t.Run(tc.name+"/tls", func(t *testing.T) {
			c := tp.dialWith(&tls.Config{NextProtos: []string{"http/1.1"}, CurvePreferences: tc.offer})
			if got := c.ConnectionState().CurveID; got != tc.want {
				t.Errorf("negotiated %v, want %v: %s", got, tc.want, tc.why)
			}
			if resp, _ := guestGet(t, c, "http/1.1", "/x"); resp.StatusCode != http.StatusOK {
				t.Errorf("a request on the connection: %s", resp.Status)
			}
		})
		t.Run(tc.name+"/quic", func(t *testing.T) {
			addr, _ := tp.quicFlowAddr(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			qc, err := quic.DialAddr(ctx, addr, &tls.Config{
				ServerName: "api.test", RootCAs: tp.guestCA, NextProtos: []string{http3.NextProtoH3}, CurvePreferences: tc.offer,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer qc.CloseWithError(0, "")
			if got := qc.ConnectionState().TLS.CurveID; got != tc.want {
				t.Errorf("negotiated %v, want %v: %s", got, tc.want, tc.why)
			}
		})
	}
}
