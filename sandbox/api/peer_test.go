package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary be the fake supervisor of
// TestClientRefusesAnotherUsersSocket, run as another user.
func TestMain(m *testing.M) {
	if sock := os.Getenv("CAPSEM_FAKE_SUPERVISOR"); sock != "" {
		fakeSupervisor(sock)
		return
	}
	os.Exit(m.Run())
}

// fakeSupervisor listens on sock (mode 0777: anyone may connect, as an
// attacker's socket would let us), answers every request with a status of
// sandbox "fake", and prints "conn N" with the bytes each connection sent
// it once that connection ends.
func fakeSupervisor(sock string) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	_ = os.Chmod(sock, 0o777)
	fmt.Println("ready")
	body := `{"name":"fake","state":"running"}`
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte("\r\n\r\n")) {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		if len(got) > 0 {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		}
		c.Close()
		fmt.Printf("conn %d\n", len(got))
	}
}

// startFakeSupervisor runs the fake supervisor as uid on a socket in a
// directory of that uid's, and returns the socket and the lines it prints.
func startFakeSupervisor(t *testing.T, uid int) (string, <-chan string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A directory uid may enter, holding a copy of this binary (go test's
	// build directory is root's alone) and a socket directory of uid's.
	dir, err := os.MkdirTemp("", "capsem-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, sockDir := filepath.Join(dir, "fake"), filepath.Join(dir, "s")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Chmod(dir, 0o755), os.WriteFile(bin, b, 0o755), os.Mkdir(sockDir, 0o700), os.Chown(sockDir, uid, uid),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(sockDir, "api.sock")
	cmd := exec.Command(bin)
	cmd.Env = []string{"CAPSEM_FAKE_SUPERVISOR=" + sock}
	if uid != os.Geteuid() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l := next(t, lines); l != "ready" {
		t.Fatalf("the fake supervisor said %q", l)
	}
	return sock, lines
}

func next(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("the fake supervisor said nothing for 10 s")
		return ""
	}
}

// A socket served by a process of another user — one who made the shared
// fallback directory first and put their socket in it — gets nothing from
// the client: not a request line, not the argv, environment or file body
// that would follow. The same fake served by our own uid is talked to,
// which shows the fake counts what it gets.
func TestClientRefusesAnotherUsersSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the fake supervisor runs as uid 65534")
	}
	for _, c := range []struct {
		name    string
		uid     int
		refused bool
		why     string
	}{
		{"ours", 0, false, "our own uid: served, and the fake records the requests"},
		{"another user's", 65534, true, "uid 65534 serves the socket: the client hangs up before a byte"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock, lines := startFakeSupervisor(t, c.uid)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cl := NewClient(sock)
			defer cl.Close()
			st, errStatus := cl.Status(ctx)
			_, errExec := cl.Exec(ctx, ExecRequest{Argv: []string{"echo", "the-argv"}, Env: []string{"TOKEN=the-env"}})
			errPut := cl.PutFile(ctx, "/root/f", strings.NewReader("the file's body"), "")
			for i, err := range []error{errStatus, errExec, errPut} {
				var fe *ForeignServerError
				switch {
				case c.refused && (!errors.As(err, &fe) || fe.UID != c.uid || !strings.Contains(err.Error(), "uid "+strconv.Itoa(c.uid))):
					t.Errorf("%s: request %d: err %v, want a ForeignServerError naming uid %d", c.why, i, err, c.uid)
				case !c.refused && errors.As(err, &fe):
					t.Errorf("%s: request %d refused: %v", c.why, i, err)
				}
			}
			if !c.refused && (errStatus != nil || st.Name != "fake") {
				t.Errorf("%s: status %+v, %v", c.why, st, errStatus)
			}
			for i := range 3 {
				n, err := strconv.Atoi(strings.TrimPrefix(next(t, lines), "conn "))
				if err != nil {
					t.Fatal(err)
				}
				if got := n > 0; got == c.refused {
					t.Errorf("%s: connection %d sent the server %d bytes", c.why, i, n)
				}
			}
		})
	}
}
