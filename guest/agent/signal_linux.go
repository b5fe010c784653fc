package agent

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ParseSignal turns a signal name from the wire ("INT", "SIGINT", "int")
// or a decimal number into a Linux signal.
func ParseSignal(name string) (syscall.Signal, error) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if v, err := strconv.Atoi(n); err == nil && v > 0 && v < 65 {
		return syscall.Signal(v), nil
	}
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	if s := unix.SignalNum(n); s != 0 {
		return s, nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}

// SignalName is the wire name of sig ("INT").
func SignalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(int(sig))
}
