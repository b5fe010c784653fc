//go:build linux

package agent

import (
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// rawEnded waits for the rawHost's stream to end.
func rawEnded(t *testing.T, c *rawHost, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-c.in:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the old host's connection still open")
		}
	}
}

// rawExec runs argv as session id and returns its stdout and exit code.
func rawExec(t *testing.T, c *rawHost, id uint32, argv ...string) (string, int) {
	t.Helper()
	if err := c.Send(proto.Exec{ID: id, Argv: argv}); err != nil {
		t.Fatal(err)
	}
	var out string
	for {
		switch m := rawNext(t, c, 10*time.Second).(type) {
		case proto.Stdout:
			out += string(m.Data)
		case proto.Exit:
			return out, m.Code
		case proto.Error:
			t.Fatalf("exec %v: %s", argv, m.Msg)
		case nil:
			t.Fatalf("exec %v: no exit; stdout %q", argv, out)
		}
	}
}

// Under vz a restored guest's vsock connection is reset and its new host
// dials again: a connection that arrives while frozen takes the old one's
// place, the new host's restored Thaw is answered on it, the old host's
// session is gone, and commands run on the new connection.
func TestFrozenAgentTakesNewHost(t *testing.T) {
	conns := make(chan io.ReadWriteCloser)
	old := newRawHostConfig(t, Config{Conns: conns})
	if err := old.Send(proto.Exec{ID: 1, Argv: []string{"sh", "-c", "echo started; exec sleep 600"}}); err != nil {
		t.Fatal(err)
	}
	var pid int
	for pid == 0 {
		switch m := rawNext(t, old, 10*time.Second).(type) {
		case proto.Started:
			pid = m.PID
		case nil:
			t.Fatal("no start")
		}
	}
	if fr := rawFreeze(t, old); fr.Refused != "" {
		t.Fatalf("frozen %+v", fr)
	}

	a, b := net.Pipe()
	defer b.Close()
	conns <- a
	rawEnded(t, old, 10*time.Second)
	c := rawHostOn(proto.NewConn(b))
	if err := c.Send(proto.Thaw{Time: time.Now().UnixNano(), Seed: seed(t), Restored: true}); err != nil {
		t.Fatal(err)
	}
	if m := rawNext(t, c, 10*time.Second); m == nil || m.Type() != proto.TypeThawed {
		t.Fatalf("first frame to the new host: %v, want thawed", m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the old host's session (pid %d) still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if out, code := rawExec(t, c, 1, "echo", "new"); out != "new\n" || code != 0 {
		t.Fatalf("on the new connection: %q exit %d", out, code)
	}
}

// While the guest is not frozen it has a host: a second connection is
// closed at once and the first goes on serving.
func TestSecondHostRefusedWhileServing(t *testing.T) {
	conns := make(chan io.ReadWriteCloser)
	c := newRawHostConfig(t, Config{Conns: conns})
	a, b := net.Pipe()
	defer b.Close()
	conns <- a
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the second connection: read %d, %v; want it closed (EOF)", n, err)
	}
	if out, code := rawExec(t, c, 1, "echo", "still"); out != "still\n" || code != 0 {
		t.Fatalf("the first host after a second connected: %q exit %d", out, code)
	}
}

// A guest that was saved and let go on keeps its connection: the same
// host thaws it there, with Conns set.
func TestThawOnSameConnWithConns(t *testing.T) {
	c := newRawHostConfig(t, Config{Conns: make(chan io.ReadWriteCloser)})
	if fr := rawFreeze(t, c); fr.Refused != "" {
		t.Fatalf("frozen %+v", fr)
	}
	if err := c.Send(proto.Thaw{Time: time.Now().UnixNano(), Seed: seed(t)}); err != nil {
		t.Fatal(err)
	}
	if m := rawNext(t, c, 10*time.Second); m == nil || m.Type() != proto.TypeThawed {
		t.Fatalf("after thaw: %v, want thawed", m)
	}
	if out, code := rawExec(t, c, 2, "echo", "on"); out != "on\n" || code != 0 {
		t.Fatalf("after thaw: %q exit %d", out, code)
	}
}
