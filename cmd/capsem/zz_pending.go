package main

import (
	"context"
	"os"
)

func createDataDiskPending(_ context.Context, path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}

func growDataDiskPending(_ context.Context, path string, size int64) error {
	return os.Truncate(path, size)
}
