// drm.go owns a holder's DRM memory: the drm-* keys of /proc/PID/fdinfo
// (Documentation/gpu/drm-usage-stats.rst), each DRM client counted once.
package device

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// addDRM adds the DRM memory fdinfo reports for the holder's fds, counting
// each DRM client once.
func addDRM(dirfd int, h *Holder) {
	clients := map[string]bool{}
	for _, fd := range h.FDs {
		b, err := readAt(dirfd, "fdinfo/"+strconv.Itoa(fd), 16384)
		if err != nil && len(b) == 0 {
			continue
		}
		info := parseFdinfoDRM(b)
		if info.driver != "" && h.DRMDriver == "" {
			h.DRMDriver = info.driver
		}
		if len(info.mem) == 0 {
			continue
		}
		if info.client != "" {
			if clients[info.client] {
				continue
			}
			clients[info.client] = true
		}
		if h.DRM == nil {
			h.DRM = map[string]uint64{}
		}
		for k, v := range info.mem {
			h.DRM[k] += v
		}
	}
}

// drmInfo is what fdinfo says about one DRM fd.
type drmInfo struct {
	driver, client string
	mem            map[string]uint64 // bytes, keys without "drm-"
}

// drmMemPrefixes are the fdinfo keys that carry memory use
// (Documentation/gpu/drm-usage-stats.rst).
var drmMemPrefixes = []string{"drm-memory-", "drm-total-", "drm-resident-"}

// parseFdinfoDRM parses the drm-* keys of one /proc/PID/fdinfo/FD text.
// Values are bytes with an optional KiB, MiB or GiB unit; malformed lines are
// skipped.
func parseFdinfoDRM(text []byte) drmInfo {
	var info drmInfo
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(key, "drm-") {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "drm-driver":
			info.driver = val
			continue
		case "drm-client-id":
			info.client = val
			continue
		}
		for _, p := range drmMemPrefixes {
			if !strings.HasPrefix(key, p) || len(key) == len(p) {
				continue
			}
			n, ok := parseDRMSize(val)
			if !ok {
				break
			}
			if info.mem == nil {
				info.mem = map[string]uint64{}
			}
			info.mem[strings.TrimPrefix(key, "drm-")] += n
			break
		}
	}
	return info
}

// parseDRMSize parses "1376 KiB", "3 MiB" or "4096".
func parseDRMSize(s string) (uint64, bool) {
	num, unit, _ := strings.Cut(s, " ")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, false
	}
	switch strings.TrimSpace(unit) {
	case "":
		return n, true
	case "KiB":
		return n << 10, true
	case "MiB":
		return n << 20, true
	case "GiB":
		return n << 30, true
	}
	return 0, false
}
