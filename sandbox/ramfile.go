package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// shmRoot is where guests' RAM files live: tmpfs, so that RAM in a file
// costs what anonymous RAM costs, and a snapshot's copy of it reads memory.
const shmRoot = "/dev/shm"

// RAMFilePath is the path of the RAM file of this process's guest name
// (Config.RAMFile) of memMiB, in a directory of the user's own on tmpfs,
// or "" and why not (the guest then runs, but cannot be saved): no tmpfs,
// or less room on it than the guest's memory — a guest whose RAM file
// cannot grow is killed by SIGBUS (Docker's /dev/shm is 64 MiB). Files
// left by dead processes are removed. Off Linux it is "" and no error:
// vz saves the whole machine, RAM included, and needs no RAM file.
func RAMFilePath(name string, memMiB int) (string, error) {
	if runtime.GOOS != "linux" {
		return "", nil
	}
	var st syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	if err := syscall.Statfs(shmRoot, &st); err != nil || st.Type != tmpfsMagic {
		return "", errors.New("no tmpfs at " + shmRoot + " for the guest's RAM")
	}
	if free := uint64(st.Bavail) * uint64(st.Bsize); free < uint64(memMiB)<<20 {
		return "", fmt.Errorf("%s has %d MiB free, less than the guest's %d MiB of RAM (mount it larger: mount -o remount,size=… %s)", shmRoot, free>>20, memMiB, shmRoot)
	}
	dir := filepath.Join(shmRoot, fmt.Sprintf("capsem-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
		// Not ours: another user's guest memory is no place for ours.
		return "", fmt.Errorf("%s is not a 0700 directory of this user's", dir)
	}
	removeStaleRAM(dir)
	return filepath.Join(dir, fmt.Sprintf("%s-%d.ram", name, os.Getpid())), nil
}

// removeStaleRAM removes RAM files whose supervisor is gone (a crash
// leaves them; each is up to a guest's memory).
func removeStaleRAM(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".ram")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(base, '-')
		pid, err := strconv.Atoi(base[i+1:])
		if i < 0 || err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
