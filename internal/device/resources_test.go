// resources_test.go tests the resource configuration: defaults, the
// resources.json override and its errors, and --device replacing the list.
package device

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultResources(t *testing.T) {
	res, err := LoadResources(t.TempDir()) // no resources.json: the defaults
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"gpu": {"/dev/nvidia*", "/dev/kfd", "/dev/dri/renderD*"},
		"npu": {"/dev/accel/accel*"},
	}
	if len(res) != len(want) {
		t.Fatalf("got %d resources, want %d: %v", len(res), len(want), res)
	}
	for name, devs := range want {
		if r := res[name]; r.Name != name || !reflect.DeepEqual(r.Devices, devs) {
			t.Errorf("%s: got %+v, want devices %v", name, r, devs)
		}
	}
}

func writeResources(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ResourcesFile), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestResourcesFileOverrides(t *testing.T) {
	dir := writeResources(t, `{
		"gpu":  {"devices": ["/dev/nvidia0", "/dev/nvidiactl"]},
		"fpga": {"devices": ["/dev/xdma0_*"]},
		"none": {"devices": []}
	}`)
	res, err := LoadResources(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := res["gpu"].Devices; !reflect.DeepEqual(got, []string{"/dev/nvidia0", "/dev/nvidiactl"}) {
		t.Errorf("gpu not replaced by the file: %v", got)
	}
	if got := res["npu"].Devices; !reflect.DeepEqual(got, []string{"/dev/accel/accel*"}) {
		t.Errorf("npu default lost: %v", got)
	}
	if r := res["fpga"]; r.Name != "fpga" || !reflect.DeepEqual(r.Devices, []string{"/dev/xdma0_*"}) {
		t.Errorf("fpga not added: %+v", r)
	}
	if r, ok := res["none"]; !ok || len(r.Devices) != 0 {
		t.Errorf("empty resource: %+v %v", r, ok)
	}
}

func TestResourcesFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"syntax", `{"gpu": {"devices": ["/dev/x"]`, "bad JSON"},
		{"unknown field", `{"gpu": {"device": ["/dev/x"]}}`, "unknown field"},
		{"relative", `{"gpu": {"devices": ["dev/x"]}}`, "not an absolute path"},
		{"bad glob", `{"gpu": {"devices": ["/dev/[x"]}}`, "not a valid glob"},
		{"empty name", `{"": {"devices": []}}`, "empty name"},
		{"null", `null`, "got null"},
		{"two values", `{} {}`, "more than one value"},
		{"list", `["/dev/x"]`, "bad JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeResources(t, tc.text)
			_, err := LoadResources(dir)
			if err == nil {
				t.Fatalf("no error for %s", tc.text)
			}
			path := filepath.Join(dir, ResourcesFile)
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s and say %q", err, path, tc.want)
			}
		})
	}
}

// A directory where the file should be is no config: it is reported and
// the defaults are used, like any other special file.
func TestResourcesFileIsDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ResourcesFile), 0o755); err != nil {
		t.Fatal(err)
	}
	var warned []string
	res, err := LoadResourcesWarn(dir, func(m string) { warned = append(warned, m) })
	if err != nil || len(warned) != 1 || !strings.Contains(warned[0], "a directory") {
		t.Fatalf("directory as config: %v, warnings %q", err, warned)
	}
	gpuDefaults(t, res, "directory")
}

func TestLookupAndPatterns(t *testing.T) {
	res := DefaultResources()
	if r := LookupResource(res, "tpu"); r.Name != "tpu" || len(r.Devices) != 0 {
		t.Errorf("unknown resource: %+v, want an empty device list", r)
	}
	gpu := LookupResource(res, "gpu")
	if got := Patterns(gpu, nil); !reflect.DeepEqual(got, gpu.Devices) {
		t.Errorf("no override: %v", got)
	}
	got := Patterns(gpu, []string{"/tmp/fake*"})
	if !reflect.DeepEqual(got, []string{"/tmp/fake*"}) {
		t.Errorf("--device must replace the list: %v", got)
	}
	got = Patterns(gpu, nil)
	got[0] = "changed"
	if gpu.Devices[0] == "changed" {
		t.Error("Patterns must return a copy")
	}
}

func TestCheckDeviceFlags(t *testing.T) {
	wd, _ := os.Getwd()
	got, err := CheckFlags([]string{"/dev/nvidia*", "rel/dev"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{"/dev/nvidia*", filepath.Join(wd, "rel/dev")}) {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", "/dev/[x"} {
		if _, err := CheckFlags([]string{bad}); err == nil || !strings.Contains(err.Error(), "--device") {
			t.Errorf("%q: got %v", bad, err)
		}
	}
}
