package main

import (
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }

// makeRaw puts the terminal f in raw mode (keys, Ctrl-C included, go to the
// guest's pty as bytes) and returns the function that restores it.
func makeRaw(f *os.File) (restore func(), err error) {
	state, err := term.MakeRaw(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	return func() { _ = term.Restore(int(f.Fd()), state) }, nil
}

// terminalSize returns f's size, or 24×80 when it has none.
func terminalSize(f *os.File) (rows, cols uint16) {
	w, h, err := term.GetSize(int(f.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 24, 80
	}
	return uint16(min(h, 0xffff)), uint16(min(w, 0xffff))
}
