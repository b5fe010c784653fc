//go:build !(darwin && vz)

package vz

import (
	"errors"
	"strings"
	"testing"
)

func TestNewNotBuilt(t *testing.T) {
	_, err := New(testConfig(t), Options{})
	if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "built only on macOS with -tags vz") {
		t.Fatalf("New: %v", err)
	}
}
