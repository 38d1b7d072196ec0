// pool_test.go tests pool discovery on fake trees, the pool of
// resources.json, and the variables a payload is given.
package device

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeTree writes files (host path -> content) under a new root.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func names(p Pool) []string {
	var out []string
	for _, d := range p.Devices {
		out = append(out, d.Name)
	}
	return out
}

func TestDiscoverNVIDIA(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"/dev/nvidia0": "", "/dev/nvidia1": "", "/dev/nvidia10": "", "/dev/nvidiactl": "", "/dev/nvidia-uvm": "",
		"/dev/nvidia-modeset": "", "/dev/nvidia-uvm-tools": "", "/dev/nvidia01": "", "/dev/nvidiaX": "",
		"/proc/driver/nvidia/gpus/0000:01:00.0/information": "Model: \t A100\nIRQ: 1\nGPU UUID: \t GPU-aaaa-1111\nDevice Minor: \t 0\nBus Location: \t 0000:01:00.0\n",
		"/proc/driver/nvidia/gpus/0000:02:00.0/information": "GPU UUID: GPU-bbbb-2222\nDevice Minor: 1\nBus Location: 0000:02:00.0\n",
		"/proc/driver/nvidia/gpus/0000:03:00.0/information": "GPU UUID: GPU-evil,0\nDevice Minor: 10\n",
	})
	p := Discover(root, "gpu")
	if got, want := names(p), []string{"nvidia0", "nvidia1", "nvidia10"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("devices %v, want %v (numbered nodes only, by number)", got, want)
	}
	if d := p.Devices[0]; d.UUID != "GPU-aaaa-1111" || d.PCI != "0000:01:00.0" || d.Nodes[0] != "/dev/nvidia0" || d.Kind != KindNVIDIA {
		t.Fatalf("device 0 = %+v", d)
	}
	if p.Devices[2].UUID != "" {
		t.Fatalf("a UUID with a comma must not be used: %+v", p.Devices[2])
	}
	if want := []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}; !reflect.DeepEqual(p.Shared, want) {
		t.Fatalf("shared %v, want %v", p.Shared, want)
	}
	env := Env(p.Devices[1:])
	if want := []string{"GPU_HOLD_DEVICES=1,2", "CUDA_VISIBLE_DEVICES=GPU-bbbb-2222,10"}; !reflect.DeepEqual(env, want) {
		t.Fatalf("env %v, want %v", env, want)
	}
}

func TestDiscoverAMD(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"/dev/kfd": "", "/dev/dri/renderD128": "", "/dev/dri/renderD129": "", "/dev/dri/renderD130": "", "/dev/dri/card0": "",
		kfdTopology + "/0/properties":  "cpu_cores_count 16\nsimd_count 0\ndrm_render_minor 0\n",
		kfdTopology + "/1/properties":  "simd_count 304\ndrm_render_minor 130\nunique_id 255\n",
		kfdTopology + "/2/properties":  "simd_count 304\ndrm_render_minor 128\nunique_id 4095\n",
		kfdTopology + "/10/properties": "simd_count 304\ndrm_render_minor 199\n", // no node: skipped
	})
	p := Discover(root, "gpu")
	if got, want := names(p), []string{"renderD130", "renderD128"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("devices %v, want %v (the topology's order, GPUs with a node only)", got, want)
	}
	if p.Devices[0].UUID != "GPU-ff" || !reflect.DeepEqual(p.Shared, []string{"/dev/kfd"}) {
		t.Fatalf("pool %+v", p)
	}
	if env := Env(p.Devices[1:]); !reflect.DeepEqual(env, []string{"GPU_HOLD_DEVICES=1", "HIP_VISIBLE_DEVICES=1", "ROCR_VISIBLE_DEVICES=1"}) {
		t.Fatalf("env %v", env)
	}
}

func TestDiscoverAMDWithoutTopology(t *testing.T) {
	root := fakeTree(t, map[string]string{"/dev/kfd": "", "/dev/dri/renderD129": "", "/dev/dri/renderD128": ""})
	if got := names(Discover(root, "gpu")); !reflect.DeepEqual(got, []string{"renderD128", "renderD129"}) {
		t.Fatalf("devices %v", got)
	}
	// Render nodes without /dev/kfd are not AMD compute devices.
	root = fakeTree(t, map[string]string{"/dev/dri/renderD128": ""})
	if p := Discover(root, "gpu"); len(p.Devices) != 0 {
		t.Fatalf("render node without kfd became a pool device: %+v", p)
	}
}

func TestDiscoverMixedAndNPU(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"/dev/nvidia0": "", "/dev/kfd": "", "/dev/dri/renderD128": "", "/dev/accel/accel1": "", "/dev/accel/accel0": "",
	})
	p := Discover(root, "gpu")
	if got := names(p); !reflect.DeepEqual(got, []string{"nvidia0", "renderD128"}) || p.Devices[1].KindIndex != 0 || p.Devices[1].Index != 1 {
		t.Fatalf("mixed pool %+v", p)
	}
	env := strings.Join(Env(p.Devices), " ")
	if env != "GPU_HOLD_DEVICES=0,1 CUDA_VISIBLE_DEVICES=0 HIP_VISIBLE_DEVICES=0 ROCR_VISIBLE_DEVICES=0" {
		t.Fatalf("env %s", env)
	}
	n := Discover(root, "npu")
	if got := names(n); !reflect.DeepEqual(got, []string{"accel0", "accel1"}) {
		t.Fatalf("npu %v", got)
	}
	if env := Env(n.Devices[1:]); !reflect.DeepEqual(env, []string{"GPU_HOLD_DEVICES=1"}) {
		t.Fatalf("npu env %v", env)
	}
	if p := Discover(t.TempDir(), "gpu"); p.Multi() || len(p.Devices) != 0 {
		t.Fatalf("empty host has a pool: %+v", p)
	}
}

func TestPoolConfig(t *testing.T) {
	good := `{"gpu": {"devices": ["/dev/fake*"], "pool": {"devices": [{"nodes": ["/dev/fake0"], "kind": "nvidia", "uuid": "GPU-x"}, {"nodes": ["/dev/fake1", "/dev/fake1b"]}], "shared": ["/dev/fakectl"], "backfill": false}}}`
	res, err := parseResources([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	p := PoolOf(res["gpu"], fakeTree(t, map[string]string{"/dev/nvidia0": "", "/dev/nvidia1": ""}))
	if got := names(p); !reflect.DeepEqual(got, []string{"fake0", "fake1"}) || !p.NoBackfill || p.Devices[1].Kind != KindOther || p.Devices[0].UUID != "GPU-x" {
		t.Fatalf("configured pool %+v (it replaces discovery)", p)
	}
	none, _ := parseResources([]byte(`{"gpu": {"devices": [], "pool": {"devices": []}}}`))
	if p := PoolOf(none["gpu"], fakeTree(t, map[string]string{"/dev/nvidia0": "", "/dev/nvidia1": ""})); p.Multi() {
		t.Fatalf("an empty configured pool is no pool: %+v", p)
	}
	bad := map[string]string{
		"relative":       `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["dev/x"]}]}}}`,
		"glob":           `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["/dev/x*"]}]}}}`,
		"unclean":        `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["/dev/../etc/x"]}]}}}`,
		"two devices":    `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["/dev/x"]}, {"nodes": ["/dev/x"]}]}}}`,
		"shared and own": `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["/dev/x"]}], "shared": ["/dev/x"]}}}`,
		"no nodes":       `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": []}]}}}`,
		"kind":           `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["/dev/x"], "kind": "tpu"}]}}}`,
		"uuid":           `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["/dev/x"], "uuid": "a,b"}]}}}`,
		"unknown field":  `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["/dev/x"], "uid": "a"}]}}}`,
	}
	for name, text := range bad {
		if _, err := parseResources([]byte(text)); err == nil {
			t.Errorf("%s: %s accepted", name, text)
		}
	}
}

func TestCheckCount(t *testing.T) {
	p := Pool{Devices: make([]Dev, 8)}
	for n, ok := range map[int]bool{0: false, 1: true, 8: true, 9: false} {
		if err := CheckCount(p, n); (err == nil) != ok {
			t.Errorf("CheckCount(8 devices, %d) = %v", n, err)
		}
	}
	if CheckCount(Pool{}, 1) != nil || CheckCount(Pool{}, 2) == nil {
		t.Error("a resource without a pool takes exactly 1")
	}
}
