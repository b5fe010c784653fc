package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/capsem/capsem/bench/internal/peerbin"
	"github.com/capsem/capsem/tests/harness"
)

// peer is one userspace network stack under test.
type peer struct {
	name string
	bin  string
	// guestMAC, when set, is given to the TAP (gvproxy leases by MAC).
	guestMAC string
	// args is the peer's command line for an environment.
	args func(e *env) ([]string, error)
	// guest says what the guest script dials once the lease is known.
	guest func(e *env, lease harness.Lease) guestConfig
}

func makePeer(name, cache string) (peer, error) {
	switch name {
	case "capsem-net":
		bin := *flagCapsemBin
		if bin == "" {
			bin = filepath.Join(cache, "capsem-net")
			if err := peerbin.BuildCapsemNet(bin); err != nil {
				return peer{}, err
			}
		}
		return peer{name: name, bin: bin, args: capsemArgs, guest: func(e *env, l harness.Lease) guestConfig {
			return guestConfig{
				DNS: l.DNS, AllowedName: "soak.test", DeniedSuffix: "denied.test", Port: e.up.port(),
				// a direct IP, and the allowed name's address on a port
				// the policy does not list: both refused on the SYN.
				Denied: [][2]any{{"203.0.113.9", 80}, {"", e.closed}},
			}
		}}, nil
	case "gvproxy":
		bin, err := peerbin.Gvproxy(cache)
		if err != nil {
			return peer{}, err
		}
		return peer{name: name, bin: bin, guestMAC: peerbin.GvproxyGuestMAC,
			args: func(e *env) ([]string, error) {
				return []string{"-listen-qemu", "unix://" + e.sock, "-mtu", strconv.Itoa(*flagMTU), "-ssh-port", "-1"}, nil
			},
			guest: func(e *env, l harness.Lease) guestConfig {
				// gvproxy answers names under containers.internal itself
				// (NXDOMAIN for any it does not know) and NATs
				// 192.168.127.254, host.containers.internal, to the host's
				// loopback; a SYN to a closed port there is refused.
				return guestConfig{
					DNS: l.DNS, AllowedName: "host.containers.internal", DeniedSuffix: "containers.internal",
					Port: e.up.port(), Denied: [][2]any{{"", e.closed}},
				}
			}}, nil
	case "passt":
		bin, err := peerbin.Passt()
		if err != nil {
			return peer{}, err
		}
		return peer{name: name, bin: bin,
			args: func(e *env) ([]string, error) {
				// passt drops root for "nobody", which must be able to
				// create the socket in dir.
				if err := os.Chmod(e.dir, 0o777); err != nil {
					return nil, err
				}
				return []string{"-f", "-q", "-s", e.sock, "-m", strconv.Itoa(*flagMTU), "-e", "-4", "-t", "none", "-u", "none"}, nil
			},
			guest: func(e *env, l harness.Lease) guestConfig {
				// passt maps the gateway to the host's loopback, and would
				// forward DNS to the host's resolver: no DNS for passt.
				return guestConfig{Host: l.Router, Port: e.up.port(), Denied: [][2]any{{"", e.closed}}}
			}}, nil
	}
	return peer{}, fmt.Errorf("unknown peer %q (want capsem-net, gvproxy or passt)", name)
}

func capsemArgs(e *env) ([]string, error) {
	pol := fmt.Sprintf(`[network]
allow = ["soak.test:%d"]
[upstream]
resolve = { "soak.test" = "127.0.0.1" }
`, e.up.port())
	pf := filepath.Join(e.dir, "policy.toml")
	if err := os.WriteFile(pf, []byte(pol), 0o644); err != nil {
		return nil, err
	}
	port, err := closedPort()
	if err != nil {
		return nil, err
	}
	e.debugAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"--policy", pf, "--data", filepath.Join(e.dir, "data"), "--ca-dir", filepath.Join(e.dir, "ca"),
		"--listen-qemu", "unix://" + e.sock, "--mtu", strconv.Itoa(*flagMTU), "--log-level", "warn",
		"--debug-addr", e.debugAddr}
	if *flagCapsemArgs != "" {
		args = append(args, strings.Fields(*flagCapsemArgs)...)
	}
	return args, nil
}
