package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/capsem/capsem/netstack"
)

// gvproxy's SSH-forwarded sockets (-forward-sock, -forward-dest,
// -forward-user, -forward-identity, each repeatable, the i-th of each one
// forward): podman machine publishes the guest's API socket on the host
// this way. capsem-net listens on the host socket; each connection to it
// becomes a channel to the guest's socket (SSH's direct-streamlocal) over
// an SSH connection to the guest's port 22, which the netstack carries in
// and records as an inbound flow, as it does a published port's.
//
// The guest's host key is not checked, as gvproxy does not: the SSH
// connection never leaves this process and the guest behind it (there is
// no network path to another machine to be fooled on), and podman
// generates the guest's keys at its first boot, which no one could pin.

// sshGuestPort is the guest's SSH port, as gvproxy dials it.
const sshGuestPort = 22

// sshForward is one -forward-sock: a host socket to a guest socket.
type sshForward struct {
	sock, dest, user string
	signer           ssh.Signer
	fl               inboundCarrier
	log              *slog.Logger

	mu     sync.Mutex
	client *ssh.Client // shared by the connections; made again when it breaks
}

// inboundCarrier carries a connection into the guest (filter.Filter).
type inboundCarrier interface {
	Inbound(ctx context.Context, client net.Conn, in netstack.Inbound) error
}

// sshForwardsFromFlags reads the four flags, which must come in equal
// numbers, and the identities.
func sshForwardsFromFlags(socks, dests, users, ids []string, fl inboundCarrier, log *slog.Logger) ([]*sshForward, error) {
	if len(socks) != len(dests) || len(socks) != len(users) || len(socks) != len(ids) {
		return nil, usagef("--forward-sock, --forward-dest, --forward-user and --forward-identity go together: give each once per forward (got %d, %d, %d, %d)", len(socks), len(dests), len(users), len(ids))
	}
	var out []*sshForward
	for i := range socks {
		key, err := os.ReadFile(ids[i])
		if err != nil {
			return nil, fmt.Errorf("--forward-identity: %w", err)
		}
		signer, err := ssh.ParsePrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("--forward-identity %s: %w (a private key without a passphrase, as podman makes)", ids[i], err)
		}
		out = append(out, &sshForward{sock: socks[i], dest: dests[i], user: users[i], signer: signer, fl: fl, log: log})
	}
	return out, nil
}

// serve listens on the host socket and tunnels each connection until ctx
// is done.
func (f *sshForward) serve(ctx context.Context) error {
	ln, err := listenServices("unix://" + f.sock)
	if err != nil {
		return fmt.Errorf("--forward-sock: %w", err)
	}
	context.AfterFunc(ctx, func() {
		ln.Close()
		f.mu.Lock()
		if f.client != nil {
			f.client.Close()
		}
		f.mu.Unlock()
	})
	go func() {
		defer os.Remove(f.sock)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.tunnel(ctx, c)
		}
	}()
	return nil
}

// tunnel carries one host connection to the guest's socket.
func (f *sshForward) tunnel(ctx context.Context, c net.Conn) {
	defer c.Close()
	ch, err := f.open(ctx)
	if err != nil {
		f.log.Warn("forward-sock: no channel to the guest's socket", "sock", f.sock, "dest", f.dest, "err", err)
		return
	}
	defer ch.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(ch, c); closeWrite(ch); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, ch); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// open opens a channel to the guest's socket, on the shared SSH
// connection, made (again) when there is none or it broke.
func (f *sshForward) open(ctx context.Context) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.client != nil {
		if ch, err := f.client.Dial("unix", f.dest); err == nil {
			return ch, nil
		}
		f.client.Close()
		f.client = nil
	}
	cl, err := f.connect(ctx)
	if err != nil {
		return nil, err
	}
	f.client = cl
	return cl.Dial("unix", f.dest)
}

// connect makes an SSH connection to the guest's port 22 through the
// netstack: one end of a pipe is carried in (netstack.Stack.Inbound,
// recorded), the SSH client speaks on the other.
func (f *sshForward) connect(ctx context.Context) (*ssh.Client, error) {
	here, there := net.Pipe()
	go func() {
		err := f.fl.Inbound(ctx, there, netstack.Inbound{
			Port:   sshGuestPort,
			Rule:   "forward-sock " + f.sock + " -> " + f.dest,
			Detail: "SSH for --forward-sock " + f.sock,
		})
		if err != nil {
			here.Close()
		}
	}()
	cfg := &ssh.ClientConfig{
		User:            f.user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(f.signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // see the top of this file
		Timeout:         30 * time.Second,
	}
	_ = here.SetDeadline(time.Now().Add(cfg.Timeout))
	sc, chans, reqs, err := ssh.NewClientConn(here, net.JoinHostPort(netstack.GuestIP.String(), "22"), cfg)
	if err != nil {
		here.Close()
		return nil, fmt.Errorf("ssh to the guest as %s: %w", f.user, err)
	}
	_ = here.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}
