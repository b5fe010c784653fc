package netstack

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestLargePacketsWrittenWithoutACopy: on the stream transport, packets of
// zeroCopyMin and more go out from gVisor's own buffers (writev) between
// copied small ones; the guest reads every frame whole and in order, the
// tap sees each frame in one piece, and the link lets go of every packet.
func TestLargePacketsWrittenWithoutACopy(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	hostEnd, guestEnd := fileConn(t, fds[0]), fileConn(t, fds[1])
	defer guestEnd.Close()

	l := newLink(MaxMTU, tcpip.LinkAddress(GatewayMAC), &Stats{})
	var tapMu sync.Mutex
	var tapped [][]byte
	l.tap = func(dir Direction, frame []byte) {
		tapMu.Lock()
		tapped = append(tapped, bytes.Clone(frame))
		tapMu.Unlock()
	}
	conn := NewStreamConn(hostEnd)
	if _, ok := conn.(vecWriter); !ok {
		t.Fatal("the stream transport does not write frames in pieces")
	}
	detach := l.attach(conn)

	sizes := []int{60, 65000, 1400, zeroCopyMin, 40000, 100}
	var pkts stack.PacketBufferList
	var want [][]byte
	for i, n := range sizes {
		// The payload in two views, as TCP's segments are.
		payload := bytes.Repeat([]byte{byte(i + 1)}, n)
		var buf buffer.Buffer
		buf.Append(buffer.NewViewWithData(payload[:n/2]))
		buf.Append(buffer.NewViewWithData(payload[n/2:]))
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: header.EthernetMinimumSize, Payload: buf})
		pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
		l.AddHeader(pkt)
		frame := append(bytes.Clone(pkt.LinkHeader().Slice()), payload...)
		want = append(want, frame)
		pkts.PushBack(pkt)
	}
	if got, err := l.WritePackets(pkts); got != len(sizes) || err != nil {
		t.Fatalf("WritePackets: %d, %v", got, err)
	}
	held := pkts.AsSlice()
	pkts.DecRef() // gVisor's reference; the link holds its own until written

	r := NewStreamConn(guestEnd)
	guestEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i, w := range want {
		got, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("frame %d (%d bytes): the guest read %d bytes that differ", i, len(w), len(got))
		}
	}
	detach()
	tapMu.Lock()
	defer tapMu.Unlock()
	if len(tapped) != len(want) {
		t.Fatalf("the tap saw %d frames, want %d", len(tapped), len(want))
	}
	for i := range want {
		if !bytes.Equal(tapped[i], want[i]) {
			t.Errorf("the tap's frame %d differs from what was sent", i)
		}
	}
	for i, pkt := range held {
		if pkt.ReadRefs() != 0 {
			t.Errorf("packet %d (%d bytes) still has %d references after it was written", i, sizes[i], pkt.ReadRefs())
		}
	}
}
