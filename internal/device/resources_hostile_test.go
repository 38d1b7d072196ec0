// resources_hostile_test.go tests resources.json against what another user
// could plant or rewrite in the queue dir: a FIFO never blocks, a symlink is
// never followed, and a file another user could write never switches the
// device-holder check off (the defaults are used).
package device

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

// switchOff is a resources.json that would turn off the gpu's device check.
const switchOff = `{"gpu": {"devices": []}}`

// notMe is a uid other than ours.
func notMe() int {
	if os.Geteuid() == plant.OtherUID {
		return plant.OtherUID + 1
	}
	return plant.OtherUID
}

func gpuDefaults(t *testing.T, res map[string]Resource, what string) {
	t.Helper()
	if got := res["gpu"].Devices; !reflect.DeepEqual(got, DefaultResources()["gpu"].Devices) {
		t.Fatalf("%s: gpu devices %v, want the defaults: an untrusted resources.json counted", what, got)
	}
}

func TestResourcesUntrustedFiles(t *testing.T) {
	cases := map[string]func(t *testing.T, path string){
		"fifo": func(t *testing.T, path string) { plant.FIFO(t, path) },
		"symlink": func(t *testing.T, path string) {
			real := filepath.Join(t.TempDir(), "real.json")
			os.WriteFile(real, []byte(switchOff), 0o644)
			os.Symlink(real, path)
		},
		"group-writable": func(t *testing.T, path string) {
			os.WriteFile(path, []byte(switchOff), 0o644)
			os.Chmod(path, 0o664)
		},
		"world-writable": func(t *testing.T, path string) {
			os.WriteFile(path, []byte(switchOff), 0o644)
			os.Chmod(path, 0o666)
		},
		"another user's": func(t *testing.T, path string) {
			os.WriteFile(path, []byte(switchOff), 0o644)
			if err := os.Chown(path, notMe(), notMe()); err != nil {
				t.Skipf("chown needs root here: %v", err)
			}
		},
		"device": func(t *testing.T, path string) { plant.Device(t, path) },
		"hard link to another user's file": func(t *testing.T, path string) {
			real := filepath.Join(filepath.Dir(path), "theirs.json")
			os.WriteFile(real, []byte(switchOff), 0o644)
			if err := os.Chown(real, notMe(), notMe()); err != nil {
				t.Skipf("chown needs root here: %v", err)
			}
			os.Link(real, path)
		},
	}
	for name, planter := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			planter(t, filepath.Join(dir, ResourcesFile))
			plant.Within(t, "LoadResources", func() {
				res, err := LoadResources(dir)
				if err != nil {
					t.Fatalf("an untrusted resources.json is a warning, not an error: %v", err)
				}
				gpuDefaults(t, res, name)
			})
			var warned []string
			LoadResourcesWarn(dir, func(m string) { warned = append(warned, m) })
			if len(warned) != 1 || !strings.Contains(warned[0], ResourcesFile) || !strings.Contains(warned[0], "uid ") ||
				!strings.Contains(warned[0], "chown root: ") || !strings.Contains(warned[0], "chmod 644 ") {
				t.Fatalf("want one warning naming the file, its owner and the fix, got %q", warned)
			}
		})
	}
}

// The queue dir's owner's file counts (a private queue dir's user, or root).
func TestResourcesTrustedFile(t *testing.T) {
	dir := writeResources(t, switchOff)
	var warned []string
	res, err := LoadResourcesWarn(dir, func(m string) { warned = append(warned, m) })
	if err != nil || len(warned) != 0 {
		t.Fatalf("trusted file: %v, warnings %q", err, warned)
	}
	if len(res["gpu"].Devices) != 0 {
		t.Fatalf("trusted file did not count: %v", res["gpu"])
	}
}
