//go:build !linux

package harness

import (
	"errors"
	"os"
)

func openTAPIn(ns, dev string) (*os.File, error) {
	return nil, errors.New("TAP devices in network namespaces need Linux")
}
