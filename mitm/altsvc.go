package mitm

import (
	"io"
	"net/http"
	"strings"

	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// stripH3AltSvc drops the HTTP/3 alternatives (h3, and drafts such as
// h3-29) from the Alt-Svc fields of h, the whole field when nothing is
// left, and reports whether it changed anything. Under [quic] mode =
// "block" an upstream's offer would only make the guest try QUIC, which
// capsem refuses.
func stripH3AltSvc(h http.Header) bool {
	vals := h.Values("Alt-Svc")
	if len(vals) == 0 {
		return false
	}
	changed := false
	var keep []string
	for _, v := range vals {
		var alts []string
		for _, alt := range strings.Split(v, ",") {
			proto, _, _ := strings.Cut(strings.TrimSpace(alt), "=")
			if proto == "h3" || strings.HasPrefix(proto, "h3-") {
				changed = true
				continue
			}
			if strings.TrimSpace(alt) != "" {
				alts = append(alts, strings.TrimSpace(alt))
			}
		}
		if len(alts) > 0 {
			keep = append(keep, strings.Join(alts, ", "))
		}
	}
	if !changed {
		return false
	}
	h.Del("Alt-Svc")
	for _, v := range keep {
		h.Add("Alt-Svc", v)
	}
	return true
}

// flowTransport is the transport a flow's requests come over: udp for
// HTTP/3, tcp otherwise (and for a Flow that does not say).
func flowTransport(f *netstack.Flow) store.Transport {
	if f.Transport == "" {
		return store.TransportTCP
	}
	return f.Transport
}

// altSvcBlock is the built-in inspector of [quic] mode = "block": an
// upstream's Alt-Svc loses its h3 offers, so the guest does not try QUIC.
type altSvcBlock struct{}

func (altSvcBlock) Begin(x inspect.Exchange, _ *http.Request) inspect.Stream {
	if x.Policy().QUICMode() != policy.QUICBlock {
		return nil
	}
	return altSvcStream{x: x}
}

type altSvcStream struct {
	inspect.Nop
	x inspect.Exchange
}

func (s altSvcStream) Response(resp *http.Response) (io.Writer, error) {
	if stripH3AltSvc(resp.Header) {
		s.x.Note("dropped the h3 entries of Alt-Svc ([quic] mode = \"block\"), so the guest does not try QUIC")
	}
	return nil, nil
}
