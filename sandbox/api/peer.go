package api

import (
	"context"
	"fmt"
	"net"
	"os"
)

// ForeignServerError is a socket served by a process of another user: the
// client hung up on it before sending anything.
type ForeignServerError struct {
	Socket string
	UID    int // the server's
	Want   int // ours (the effective uid)
}

func (e *ForeignServerError) Error() string {
	return fmt.Sprintf("api: %s is served by a process of uid %d, not by you (uid %d): nothing was sent to it. "+
		"Another user's process has taken the sandbox's socket: stop that process, remove the socket and its "+
		"directory if they are not yours, and start the sandbox again", e.Socket, e.UID, e.Want)
}

// dial connects to the supervisor's socket and checks, before anything is
// written, that the process at the other end runs as our effective uid.
// The socket's mode keeps other users from connecting to us, not from
// putting their own socket where we connect: a socket under a shared
// directory ($XDG_RUNTIME_DIR, /tmp) of another user's making would
// receive the argv, the environment and the files of every command, and
// could answer with made-up output and ignore a stop. A root client
// accepts only root.
func dial(ctx context.Context, socket string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	uid, err := peerUID(c.(*net.UnixConn))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("api: %s: the server's uid cannot be read (%v): nothing was sent to it", socket, err)
	}
	if want := os.Geteuid(); uid != want {
		c.Close()
		return nil, &ForeignServerError{Socket: socket, UID: uid, Want: want}
	}
	return c, nil
}

// peerUID is the effective uid of the process at c's other end, read on its
// descriptor by the system's own call (fdPeerUID, one file per system).
func peerUID(c *net.UnixConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	uid, serr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { uid, serr = fdPeerUID(int(fd)) }); err != nil {
		return -1, err
	}
	return uid, serr
}
