// Package memfloor holds the memory floor: parsing --mem-floor and
// $GPU_HOLD_MEM_ABORT_GIB, reading MemAvailable, and the watcher that, while
// the payload runs, says when available memory falls below the floor. It
// wakes on a PSI trigger on /proc/pressure/memory where the kernel has one,
// and checks once a second in any case; it never spins.
package memfloor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// Env is the variable fleet scripts set: a floor of N GiB.
// --mem-floor wins over it.
const Env = "GPU_HOLD_MEM_ABORT_GIB"

// ParseSize parses a size: plain bytes ("1048576"), or a number (decimals
// allowed) with a unit K, M, G or T, optionally followed by "i" and/or "B"
// ("512M", "8G", "8GiB", "1.5GB", "64k"). Every unit is a power of 1024: on
// these hosts sizes are memory sizes. Case does not matter.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q does not start with a number (examples: 8G, 512MiB, 1073741824)", s)
	}
	var shift uint
	switch strings.TrimSuffix(strings.TrimSuffix(unit, "b"), "i") {
	case "":
		if unit == "i" || unit == "ib" {
			return 0, fmt.Errorf("size %q has no unit before %q (examples: 8G, 512MiB)", s, unit)
		}
	case "k":
		shift = 10
	case "m":
		shift = 20
	case "g":
		shift = 30
	case "t":
		shift = 40
	default:
		return 0, fmt.Errorf("size %q has an unknown unit %q: use K, M, G or T (powers of 1024), or plain bytes", s, t[i:])
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n > math.MaxUint64>>shift {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n << shift, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q is not a number followed by a unit (examples: 8G, 1.5GiB)", s)
	}
	v := f * float64(uint64(1)<<shift)
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return uint64(v), nil
}

// Resolve returns the memory floor in bytes for a hold: --mem-floor
// (flag) when given, else $GPU_HOLD_MEM_ABORT_GIB (N GiB; decimals allowed),
// else 0, which means no floor. A floor of 0 from either also means none.
func Resolve(flag string) (uint64, error) {
	if flag != "" {
		n, err := ParseSize(flag)
		if err != nil {
			return 0, fmt.Errorf("--mem-floor: %v", err)
		}
		return n, nil
	}
	env := strings.TrimSpace(os.Getenv(Env))
	if env == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(env, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f*(1<<30) >= math.MaxUint64 {
		return 0, fmt.Errorf("$%s=%q is not a number of GiB: set it to e.g. 8, or unset it", Env, env)
	}
	return uint64(f * (1 << 30)), nil
}

// FormatBytes renders n for a message: "3.1 GiB", "512.0 MiB", "900 bytes".
func FormatBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Source returns the memory available now, in bytes. It is the seam the
// watcher reads through; tests feed it fake values.
type Source func() (uint64, error)

// Available reads MemAvailable from /proc/meminfo.
func Available() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(b)
}

// parseMemAvailable finds "MemAvailable: N kB" in a /proc/meminfo text.
func parseMemAvailable(b []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			break
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		return n, nil
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable line (kernel older than 3.14?)")
}

// Low says that available memory fell below the floor.
type Low struct {
	Available uint64 `json:"available"` // bytes
	Floor     uint64 `json:"floor"`     // bytes
}

// Error is the message with the numbers, e.g. "available memory 3.1 GiB
// fell below the floor 8.0 GiB".
func (m Low) Error() string {
	return fmt.Sprintf("available memory %s fell below the floor %s", FormatBytes(m.Available), FormatBytes(m.Floor))
}

var (
	// memCheckInterval is the cheap check's period; the PSI trigger wakes
	// the watcher sooner under pressure.
	memCheckInterval = time.Second
	// psiPath is the system-wide memory pressure file.
	psiPath = "/proc/pressure/memory"
)

// Watch watches available memory (src; nil means Available)
// against floor (bytes) until ctx ends. The channel delivers at most one
// Low, the first time available memory is below the floor (at once if it
// already is), and is never closed; the watcher stops after delivering or
// when ctx ends. A floor of 0 means no floor: the channel is nil, and never
// delivers. An error means the source could not be read at the start.
func Watch(ctx context.Context, floor uint64, src Source) (<-chan Low, error) {
	if floor == 0 {
		return nil, nil
	}
	if src == nil {
		src = Available
	}
	avail, err := src()
	if err != nil {
		return nil, fmt.Errorf("cannot read available memory for the memory floor: %v; drop --mem-floor/$%s or fix /proc", err, Env)
	}
	ch := make(chan Low, 1)
	if avail < floor {
		ch <- Low{Available: avail, Floor: floor}
		return ch, nil
	}
	psi := openPSITrigger()
	go func() {
		defer func() {
			if psi >= 0 {
				unix.Close(psi)
			}
		}()
		for {
			var fds []unix.PollFd
			if psi >= 0 {
				fds = []unix.PollFd{{Fd: int32(psi), Events: unix.POLLPRI}}
			}
			if _, err := proc.Poll(ctx, fds, memCheckInterval); err != nil {
				return // ctx ended (or poll failed: nothing to watch with)
			}
			if len(fds) > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				unix.Close(psi) // the trigger is gone: the timer carries on
				psi = -1
			}
			avail, err := src()
			if err != nil {
				continue // a passing failure; check again next time
			}
			if avail < floor {
				ch <- Low{Available: avail, Floor: floor}
				return
			}
		}
	}()
	return ch, nil
}

// openPSITrigger opens a "some" memory-stall trigger (150ms of stall in a
// 1s window; 2s, the least an unprivileged user may ask for, when 1s is
// refused). It returns -1 when the kernel has no PSI or refuses.
func openPSITrigger() int {
	for _, trig := range []string{"some 150000 1000000", "some 150000 2000000"} {
		fd, err := unix.Open(psiPath, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1
		}
		// The kernel replaces the last byte written with a NUL: send one.
		if _, err := unix.Write(fd, append([]byte(trig), 0)); err == nil {
			return fd
		}
		unix.Close(fd)
	}
	return -1
}
