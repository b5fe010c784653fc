package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capsem/capsem/mcpgate/testserver"
)

// upstreamName is the name the remote MCP server's certificate carries and
// the mitm path's policy allows.
const upstreamName = "mcp.test"

// upstreamMain is the "upstream" sub-mode: the test server's tools (package
// mcpgate/testserver, the same as `capsem mcp-test-server`) served as a
// remote streamable-HTTP MCP server at https://127.0.0.1:PORT/mcp, HTTP/2
// and HTTP/1.1. It prints PORT on a line and serves until its stdin
// closes. It is a process of its own, as the stdio server is.
func upstreamMain(args []string) {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	certFile := fs.String("cert", "", "leaf certificate PEM")
	keyFile := fs.String("key", "", "leaf key PEM")
	fs.Parse(args)
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatal("mcpbench upstream: ", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal("mcpbench upstream: ", err)
	}
	srv := testserver.New()
	mux := http.NewServeMux()
	// It stands in for a remote server reached by name (mcp.test, pointed
	// at loopback by [upstream] resolve): the SDK's DNS-rebinding check,
	// which refuses a non-loopback Host on a loopback listener, would
	// refuse every request.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}}
	go hs.ServeTLS(ln, "", "")
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	io.Copy(io.Discard, os.Stdin)
}
