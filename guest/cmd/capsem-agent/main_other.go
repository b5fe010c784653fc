//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "capsem-agent runs inside capsem's Linux guest; build it with GOOS=linux CGO_ENABLED=0")
	os.Exit(2)
}
