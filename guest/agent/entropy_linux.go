package agent

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AddEntropy mixes seed into the kernel's entropy pool, credited at 8 bits
// a byte (RNDADDENTROPY), and has the kernel reseed its random generator
// from the pool at once (RNDRESEEDCRNG). A guest restored from a snapshot,
// or forked from one, runs with a copy of another guest's generator state:
// without a reseed two forks draw the same "random" numbers until the
// kernel reseeds on its own (up to a minute). Both ioctls need
// CAP_SYS_ADMIN (the agent is root in the guest).
func AddEntropy(seed []byte) error {
	if len(seed) == 0 {
		return nil
	}
	fd, err := unix.Open("/dev/urandom", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("agent: add entropy: %w", err)
	}
	defer unix.Close(fd)
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(8*len(seed)))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		return fmt.Errorf("agent: add entropy (RNDADDENTROPY): %w", e)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.RNDRESEEDCRNG, 0); e != 0 {
		return fmt.Errorf("agent: reseed the kernel's generator (RNDRESEEDCRNG): %w", e)
	}
	return nil
}
