package tests

import (
	"fmt"
	"net"
	"time"
)

// waitListening waits until something accepts TCP connections on
// 127.0.0.1:port, for at most within: a server the test started (node, squid)
// is ready.
func waitListening(port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on 127.0.0.1:%d after %v: %w", port, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
