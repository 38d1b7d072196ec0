// discover.go owns finding a resource's pool on the host: NVIDIA
// (/dev/nvidiaN, ids from /proc/driver/nvidia/gpus/*/information), AMD
// (render nodes of the GPUs in /sys/class/kfd/kfd/topology, /dev/kfd
// shared) and NPUs (/dev/accel/accelN). Every path is read under a root
// directory, so tests run on a fake tree.
package device

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Discover finds the pool of resource res under root ("" or "/": the host).
// gpu is the NVIDIA devices followed by the AMD ones; npu the accel nodes;
// other resources have no discovered pool (resources.json can give one).
func Discover(root, res string) Pool {
	if root == "" {
		root = "/"
	}
	var p Pool
	switch res {
	case "gpu":
		nv, nvShared := discoverNVIDIA(root)
		amd, amdShared := discoverAMD(root)
		p.Devices = append(nv, amd...)
		p.Shared = append(nvShared, amdShared...)
	case "npu":
		p.Devices = discoverNPU(root)
	}
	p.Devices = numbered(p.Devices)
	return p
}

// exists reports whether host path p exists under root.
func exists(root, p string) bool {
	_, err := os.Lstat(filepath.Join(root, p))
	return err == nil
}

// numberedNodes lists host paths dir/prefixN under root, by N.
func numberedNodes(root, dir, prefix string) []string {
	ents, _ := os.ReadDir(filepath.Join(root, dir))
	type node struct {
		n    int
		path string
	}
	var ns []node
	for _, e := range ents {
		s, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || strconv.Itoa(n) != s {
			continue
		}
		ns = append(ns, node{n, filepath.Join(dir, e.Name())})
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].n < ns[j].n })
	out := make([]string, len(ns))
	for i, x := range ns {
		out[i] = x.path
	}
	return out
}

// nvidiaShared are the NVIDIA nodes every GPU needs.
var nvidiaShared = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}

func discoverNVIDIA(root string) (devs []Dev, shared []string) {
	info := nvidiaInfo(root)
	for _, p := range numberedNodes(root, "/dev", "nvidia") {
		minor := strings.TrimPrefix(filepath.Base(p), "nvidia")
		d := Dev{Name: filepath.Base(p), Kind: KindNVIDIA, Nodes: []string{p}}
		if i, ok := info[minor]; ok {
			d.UUID, d.PCI = i.uuid, i.pci
		}
		devs = append(devs, d)
	}
	if len(devs) == 0 {
		return nil, nil
	}
	for _, s := range nvidiaShared {
		if exists(root, s) {
			shared = append(shared, s)
		}
	}
	return devs, shared
}

type gpuInfo struct{ uuid, pci string }

// nvidiaInfo reads the driver's information files, by device minor.
func nvidiaInfo(root string) map[string]gpuInfo {
	out := map[string]gpuInfo{}
	files, _ := filepath.Glob(filepath.Join(root, "/proc/driver/nvidia/gpus/*/information"))
	for _, f := range files {
		kv := readKV(f, ":")
		minor := kv["Device Minor"]
		if minor == "" || !plainID(kv["GPU UUID"]) {
			continue
		}
		pci := kv["Bus Location"]
		if !plainID(pci) {
			pci = ""
		}
		out[minor] = gpuInfo{uuid: kv["GPU UUID"], pci: pci}
	}
	return out
}

// plainID reports whether s can go into a comma-separated variable as is.
func plainID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == ':' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// readKV reads "key<sep> value" lines (the first sep splits).
func readKV(path, sep string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

const kfdTopology = "/sys/class/kfd/kfd/topology/nodes"

// discoverAMD lists the GPUs of the kfd topology in its order (the order
// HIP counts them in), each by its render node. Without a topology but
// with /dev/kfd, every render node is taken for an AMD GPU.
func discoverAMD(root string) (devs []Dev, shared []string) {
	if !exists(root, "/dev/kfd") {
		return nil, nil
	}
	for _, n := range numberedNodes(root, kfdTopology, "") {
		kv := readKV(filepath.Join(root, n, "properties"), " ")
		minor, err := strconv.Atoi(kv["drm_render_minor"])
		if err != nil || minor <= 0 || kv["simd_count"] == "0" {
			continue // a CPU node
		}
		node := "/dev/dri/renderD" + strconv.Itoa(minor)
		if !exists(root, node) {
			continue
		}
		d := Dev{Name: filepath.Base(node), Kind: KindAMD, Nodes: []string{node}}
		if id, err := strconv.ParseUint(kv["unique_id"], 10, 64); err == nil && id != 0 {
			d.UUID = "GPU-" + strconv.FormatUint(id, 16)
		}
		devs = append(devs, d)
	}
	if len(devs) == 0 && !exists(root, kfdTopology) {
		for _, p := range numberedNodes(root, "/dev/dri", "renderD") {
			devs = append(devs, Dev{Name: filepath.Base(p), Kind: KindAMD, Nodes: []string{p}})
		}
	}
	if len(devs) == 0 {
		return nil, nil
	}
	return devs, []string{"/dev/kfd"}
}

func discoverNPU(root string) []Dev {
	var devs []Dev
	for _, p := range numberedNodes(root, "/dev/accel", "accel") {
		devs = append(devs, Dev{Name: filepath.Base(p), Kind: KindNPU, Nodes: []string{p}})
	}
	return devs
}
