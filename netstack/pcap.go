package netstack

import (
	"bufio"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// PCAP writes every frame, both ways, to a pcap file Wireshark opens.
type PCAP struct {
	mu  sync.Mutex
	bw  *bufio.Writer
	w   *pcapgo.Writer
	err error
}

// NewPCAP writes the pcap file header to w.
func NewPCAP(w io.Writer) (*PCAP, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	pw := pcapgo.NewWriter(bw)
	if err := pw.WriteFileHeader(maxFrame, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("pcap header: %w", err)
	}
	return &PCAP{bw: bw, w: pw}, nil
}

// Tap is the FrameTap to give the stack.
func (p *PCAP) Tap(_ Direction, frame []byte) {
	ci := gopacket.CaptureInfo{Timestamp: time.Now(), CaptureLength: len(frame), Length: len(frame)}
	p.mu.Lock()
	if p.err == nil {
		p.err = p.w.WritePacket(ci, frame)
	}
	p.mu.Unlock()
}

// Flush writes buffered packets out and reports the first write error.
func (p *PCAP) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	return p.bw.Flush()
}
