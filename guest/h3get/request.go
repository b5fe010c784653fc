package h3get

import "time"

// Request is one HTTP/3 GET, and optionally a second one that tests
// resumption or migration. It is the JSON the tests pass to the client.
type Request struct {
	URL string
	// CA is a PEM file of the roots to trust; empty means the system's
	// (in the guest: the bundle with capsem's CA in it).
	CA   string
	SNI  string // the server name to send; empty means the URL's host
	Addr string // the UDP address to dial; empty means the URL's host:port
	Mark string // sent as X-H3-Mark; empty sends none
	// Timeout bounds each request, its handshake included; zero means 20 s.
	Timeout time.Duration
	// Resume makes a second request on a new connection that resumes the
	// first's TLS session and sends its request as 0-RTT data if the
	// server's ticket allows early data (Result.Again.Used0RTT).
	Resume bool
	// Migrate probes a new path from another local port once the first
	// response is in, for at most 2 s; on success it switches to that path
	// and sends the request again on it (Result.PathErr, Result.Again).
	Migrate bool
}

// Result is what a Request got.
type Result struct {
	Status  int
	Proto   string // the response's protocol: HTTP/3.0 whenever a response came
	Body    string // at most 1 MiB of it
	Err     string
	Refused bool  // the dial failed with ECONNREFUSED: ICMP port unreachable
	Millis  int64 // from the start of this request to the end of its body
	// Resumed and Used0RTT describe the connection the request went over.
	Resumed  bool
	Used0RTT bool
	// PathErr is why a Migrate probe failed; empty when it was validated.
	PathErr string `json:",omitempty"`
	// Again is the second request of Resume or Migrate.
	Again *Result `json:",omitempty"`
}

func (r Request) timeout() time.Duration {
	if r.Timeout == 0 {
		return 20 * time.Second
	}
	return r.Timeout
}
