package ports

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/netstack"
)

// echoCarrier stands in for the netstack: it answers each connection
// with the Inbound it was given, then echoes until ctx ends it.
type echoCarrier struct{ got chan netstack.Inbound }

func (c echoCarrier) Inbound(ctx context.Context, client net.Conn, in netstack.Inbound) error {
	defer client.Close()
	c.got <- in
	stop := context.AfterFunc(ctx, func() { client.Close() })
	defer stop()
	_, err := io.Copy(client, client)
	return err
}

func TestPublisher(t *testing.T) {
	p := New(nil)
	defer p.Close()
	sp, err := ParseSpec("0:80")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Add(sp)
	if err != nil {
		t.Fatal(err)
	}
	if got.HostPort == 0 || got.GuestPort != 80 || got.HostIP != DefaultHostIP {
		t.Fatalf("published %v", got)
	}
	// Before Attach a connection waits in the backlog, then is carried.
	c, err := net.Dial("tcp", got.HostAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	carrier := echoCarrier{got: make(chan netstack.Inbound, 4)}
	p.Attach(carrier)
	select {
	case in := <-carrier.got:
		if in.Port != 80 || in.Rule != got.String() || in.Peer.String() != c.LocalAddr().String() {
			t.Fatalf("carried %+v (the client is %s)", in, c.LocalAddr())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not carried")
	}
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("echo: %q %v", buf, err)
	}

	// Another publisher (another sandbox) asking for the same host port.
	other := New(nil)
	defer other.Close()
	if _, err := other.Add(got); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "0 for a free one") {
		t.Fatalf("the same host port twice: %v", err)
	}
	// The same sandbox publishing it twice.
	if _, err := p.Add(got); err == nil || !strings.Contains(err.Error(), "published already") {
		t.Fatalf("the same port twice in one sandbox: %v", err)
	}
	if l := p.List(); len(l) != 1 || l[0].Spec != got || l[0].Asked != sp {
		t.Fatalf("list %+v", l)
	}

	// Removed by the spec it was asked with: the listener and the
	// connection it carried are closed.
	if port, err := p.Remove(sp); err != nil || port.Spec != got {
		t.Fatalf("remove: %v %v", port, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Fatal("the carried connection outlived its port")
	}
	if c2, err := net.DialTimeout("tcp", got.HostAddr().String(), time.Second); err == nil {
		c2.Close()
		t.Fatal("the port still listens after Remove")
	}
	if _, err := p.Remove(sp); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("remove twice: %v", err)
	}
	p.Close()
	if _, err := p.Add(sp); err == nil {
		t.Fatal("Add after Close")
	}
}
