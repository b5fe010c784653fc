package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/ports"
)

// gvproxy's services API (-services), the part podman machine and crc
// call to publish a guest's ports: the port forwarder.
//
//	GET  /services/forwarder/all       [{"local":"127.0.0.1:2223","remote":"192.168.127.2:22","protocol":"tcp"}]
//	POST /services/forwarder/expose    {"local":"127.0.0.1:2223","remote":"192.168.127.2:22","protocol":"tcp"}
//	POST /services/forwarder/unexpose  {"local":"127.0.0.1:2223","protocol":"tcp"}
//
// The JSON is gvproxy's (gvisor-tap-vsock pkg/types ExposeRequest and
// UnexposeRequest); an error is a non-200 status with the message as the
// body, as gvproxy answers. Each exposed port is a ports.Publisher listener
// whose connections the netstack carries into the guest and records as
// inbound flows. What differs from gvproxy, on purpose:
//
//   - TCP only: udp, unix and npipe are refused with why.
//   - A local address without a host (":2223") listens on 127.0.0.1, not
//     on every interface: another address must be written.
//   - The remote's port is the guest port; its address is the guest's
//     (capsem-net serves one guest), whichever IP the caller writes there
//     (podman writes gvproxy's 192.168.127.2).
//
// The rest of gvproxy's API (DNS zones, the DHCP leases, stats) is not
// served: 404 with what is.

// exposeRequest is gvproxy's ExposeRequest (and UnexposeRequest, without
// Remote).
type exposeRequest struct {
	Local    string `json:"local"`
	Remote   string `json:"remote,omitempty"`
	Protocol string `json:"protocol"`
}

// services serves the forwarder over pub.
type services struct {
	pub *ports.Publisher
	log *slog.Logger

	mu      sync.Mutex
	remotes map[netip.AddrPort]string // the remote each host address was exposed with, as written
}

// listenServices listens where -services says: unix:///PATH (a socket of
// mode 0600) or tcp://127.0.0.1:PORT (a loopback address only: whoever
// reaches it publishes the guest's ports).
func listenServices(spec string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(spec, "unix://"):
		path := strings.TrimPrefix(spec, "unix://")
		if !strings.HasPrefix(path, "/") {
			return nil, usagef("-services %q: want unix:///absolute/path", spec)
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
				c.Close()
				return nil, fmt.Errorf("-services: %s is in use by another process", path)
			}
			_ = os.Remove(path) // a stale socket
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("-services: %w", err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			ln.Close()
			return nil, fmt.Errorf("-services: %w", err)
		}
		return ln, nil
	case strings.HasPrefix(spec, "tcp://"):
		ap, err := netip.ParseAddrPort(strings.TrimPrefix(spec, "tcp://"))
		if err != nil || !ap.Addr().IsLoopback() {
			return nil, usagef("-services %q: want tcp://127.0.0.1:PORT (a loopback address: whoever reaches the API publishes the guest's ports)", spec)
		}
		ln, err := net.Listen("tcp", ap.String())
		if err != nil {
			return nil, fmt.Errorf("-services: %w", err)
		}
		return ln, nil
	}
	return nil, usagef("-services %q: want unix:///absolute/path or tcp://127.0.0.1:PORT", spec)
}

// serveServices serves the forwarder on ln until ctx is done.
func serveServices(ctx context.Context, ln net.Listener, pub *ports.Publisher, log *slog.Logger) {
	s := &services{pub: pub, log: log, remotes: map[netip.AddrPort]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /services/forwarder/all", s.all)
	mux.HandleFunc("POST /services/forwarder/expose", s.expose)
	mux.HandleFunc("POST /services/forwarder/unexpose", s.unexpose)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "capsem-net serves gvproxy's port forwarder only: GET /services/forwarder/all, POST /services/forwarder/expose and /services/forwarder/unexpose", http.StatusNotFound)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	context.AfterFunc(ctx, func() { srv.Close() })
	go func() { _ = srv.Serve(ln) }()
}

func (s *services) all(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []exposeRequest{}
	for _, p := range s.pub.List() {
		out = append(out, exposeRequest{Local: p.Spec.HostAddr().String(), Remote: s.remotes[p.Spec.HostAddr()], Protocol: "tcp"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *services) expose(w http.ResponseWriter, r *http.Request) {
	var req exposeRequest
	if !decodeRequest(w, r, &req) {
		return
	}
	spec, err := exposeSpec(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got, err := s.pub.Add(spec)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.remotes[got.HostAddr()] = req.Remote
	s.log.Info("exposed", "local", got.HostAddr().String(), "guest port", got.GuestPort)
}

func (s *services) unexpose(w http.ResponseWriter, r *http.Request) {
	var req exposeRequest
	if !decodeRequest(w, r, &req) {
		return
	}
	local, err := localAddr(req.Local)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := tcpOnly(req.Protocol); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.pub.Remove(ports.Spec{HostIP: local.Addr(), HostPort: local.Port()}); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	delete(s.remotes, local)
	s.log.Info("unexposed", "local", local.String())
}

func decodeRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(v); err != nil {
		http.Error(w, "the body is not gvproxy's JSON ({\"local\":\"127.0.0.1:2223\",\"remote\":\"192.168.127.2:22\",\"protocol\":\"tcp\"}): "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// exposeSpec is an expose request as a ports.Spec.
func exposeSpec(req exposeRequest) (ports.Spec, error) {
	if err := tcpOnly(req.Protocol); err != nil {
		return ports.Spec{}, err
	}
	local, err := localAddr(req.Local)
	if err != nil {
		return ports.Spec{}, err
	}
	host, port, err := net.SplitHostPort(req.Remote)
	if err != nil {
		return ports.Spec{}, fmt.Errorf("remote %q: want the guest's IP:PORT, like 192.168.127.2:22", req.Remote)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return ports.Spec{}, fmt.Errorf("remote %q: want the guest's IP:PORT, like 192.168.127.2:22 (capsem-net carries it to its one guest's port)", req.Remote)
	}
	gp, err := strconv.ParseUint(port, 10, 16)
	if err != nil || gp == 0 {
		return ports.Spec{}, fmt.Errorf("remote %q: %q is not a port", req.Remote, port)
	}
	return ports.Spec{HostIP: local.Addr(), HostPort: local.Port(), GuestPort: uint16(gp)}, nil
}

// localAddr is an expose request's local address: IP:PORT, or :PORT for
// 127.0.0.1 (gvproxy would listen on every interface).
func localAddr(s string) (netip.AddrPort, error) {
	if strings.HasPrefix(s, ":") {
		s = ports.DefaultHostIP.String() + s
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("local %q: want IP:PORT, like 127.0.0.1:2223 (a host name is not resolved)", s)
	}
	return ap, nil
}

func tcpOnly(proto string) error {
	switch proto {
	case "tcp", "":
		return nil
	}
	return errors.New("protocol " + strconv.Quote(proto) + ": capsem-net publishes TCP ports only (udp, unix and npipe forwarding are not served)")
}
