package netstack

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/capsem/capsem/store"
)

// DNS over TCP, to any address on port 53, is answered by fake DNS like
// UDP. Before these limits, 1,500 connections pipelining queries while the
// guest read no answer added 1.7 GiB to capsem-net (in the namespace test,
// 200 queries on each: 393 MiB), because every connection had gVisor's
// 1 MiB buffers each way and was answered as fast as it asked; with them
// the same test adds 10–13 MiB. The limits:
const (
	// DefaultMaxDNSTCPConns caps the guest's open TCP/53 connections.
	// Resolvers fall back to TCP only for a truncated answer, one
	// connection per query; capsem's answers are never truncated, so
	// real guests hold none or a handful.
	DefaultMaxDNSTCPConns = 64
	// dnsTCPBuffer is each TCP/53 connection's send and receive buffer
	// (gVisor's smallest): the answer being written, and a query or two.
	dnsTCPBuffer = 4 << 10
	// dnsTCPMaxQuery bounds one query. A query carries one question (a
	// name of at most 255 bytes) and perhaps an EDNS record: a few
	// hundred bytes. A larger length prefix ends the connection.
	dnsTCPMaxQuery = 4 << 10
	// dnsTCPIdle closes a connection that sends no query for this long.
	dnsTCPIdle = 10 * time.Second
	// dnsTCPWrite bounds writing one answer: a guest that reads none
	// stops the connection within this time once the small send buffer
	// is full.
	dnsTCPWrite = 5 * time.Second
)

// acceptDNS completes the handshake of a TCP/53 connection and gives it
// small buffers.
func (s *Stack) acceptDNS(r *tcp.ForwarderRequest) (net.Conn, bool) {
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	r.Complete(false)
	if terr != nil {
		return nil, false
	}
	opts := ep.SocketOptions()
	opts.SetSendBufferSize(dnsTCPBuffer, true)
	opts.SetReceiveBufferSize(dnsTCPBuffer, true)
	return gonet.NewTCPConn(&wq, ep), true
}

// serveTCPDNS answers length-prefixed queries on a TCP connection the guest
// opened to any address on port 53, one at a time: the next query is not
// read until the previous answer is written.
func (s *Stack) serveTCPDNS(c net.Conn, resolver netip.Addr) {
	defer c.Close()
	var lenBuf [2]byte
	buf := make([]byte, 0, 512)
	out := make([]byte, 0, 512)
	for {
		c.SetReadDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lenBuf[:]))
		if n > dnsTCPMaxQuery {
			s.stats.DNSQueries.Add(1)
			s.stats.DNSDenied.Add(1)
			s.dnsLog.record(&store.DNS{Transport: store.TransportTCP, Decision: store.Denied, Reason: ReasonMalformedDNS, ResolverAsked: resolver})
			return
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		s.stats.DNSQueries.Add(1)
		reply, _ := s.answerDNS(buf, resolver, store.TransportTCP)
		if reply == nil {
			return
		}
		out = binary.BigEndian.AppendUint16(out[:0], uint16(len(reply)))
		out = append(out, reply...)
		c.SetWriteDeadline(time.Now().Add(dnsTCPWrite))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
