package main

import (
	"fmt"
	"os"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if os.Getpid() == 1 {
		initMain() // does not return
	}
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serveMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && (os.Args[1] == "version" || os.Args[1] == "--version") {
		fmt.Println("capsem-agent", version)
		return
	}
	fmt.Fprint(os.Stderr, `capsem-agent is the /init of capsem's guest.

usage:
  capsem-agent serve [--boot FILE] [--port NAME|PATH | --vsock PORT | --stdio] [--workspace DIR] [--debug]
  capsem-agent version
`)
	os.Exit(2)
}
