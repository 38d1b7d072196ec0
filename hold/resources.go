// resources.go owns the resources a hold can queue for and the device nodes
// that mean "holds this device": built-in defaults (gpu, npu), the optional
// <queue dir>/resources.json that overrides them, and --device, which replaces
// a resource's list for one hold.
package hold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ResourcesFile is the name of the resource configuration in the queue dir.
//
// Its format is one JSON object mapping a resource name to its device node
// patterns (absolute paths; shell globs as in filepath.Match are allowed):
//
//	{
//	  "gpu": {"devices": ["/dev/nvidia*", "/dev/kfd", "/dev/dri/renderD*"]},
//	  "npu": {"devices": ["/dev/accel/accel*"]},
//	  "fpga": {"devices": ["/dev/xdma0_*"]}
//	}
//
// An entry replaces the built-in entry of the same name; built-in resources
// the file does not name keep their defaults. An empty list means the
// resource has no device nodes (no device-holder check). Unknown fields are
// errors, so a misspelt key is noticed instead of ignored.
const ResourcesFile = "resources.json"

// Resource is one queue's name and the device node patterns that mean
// "holds this resource".
type Resource struct {
	Name    string   `json:"-"`
	Devices []string `json:"devices"`
}

// DefaultResources returns the built-in resources: gpu (NVIDIA and AMD nodes)
// and npu (accel nodes).
func DefaultResources() map[string]Resource {
	return map[string]Resource{
		"gpu": {Name: "gpu", Devices: []string{"/dev/nvidia*", "/dev/kfd", "/dev/dri/renderD*"}},
		"npu": {Name: "npu", Devices: []string{"/dev/accel/accel*"}},
	}
}

// LoadResources returns the resources for queue dir queueDir: the defaults,
// overridden entry by entry by queueDir/resources.json when that file exists.
// A missing file is not an error; an unreadable or malformed one is, and the
// error names the file.
func LoadResources(queueDir string) (map[string]Resource, error) {
	res := DefaultResources()
	if queueDir == "" {
		return res, nil
	}
	path := filepath.Join(queueDir, ResourcesFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read resource config %s: %v; fix its permissions or remove it to use the defaults", path, err)
	}
	file, err := parseResources(data)
	if err != nil {
		return nil, fmt.Errorf("resource config %s: %v; fix the file (format: {\"gpu\": {\"devices\": [\"/dev/nvidia*\"]}}) or remove it to use the defaults", path, err)
	}
	for name, r := range file {
		res[name] = r
	}
	return res, nil
}

// parseResources decodes and checks the text of a resources.json.
func parseResources(data []byte) (map[string]Resource, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var file map[string]Resource
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("bad JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("bad JSON: more than one value in the file")
	}
	if file == nil {
		return nil, errors.New("expected an object mapping resource names to {\"devices\": [...]}, got null")
	}
	names := make([]string, 0, len(file))
	for name := range file {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := file[name]
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("a resource has an empty name")
		}
		for _, p := range r.Devices {
			if err := checkDevicePattern(p); err != nil {
				return nil, fmt.Errorf("resource %q: %v", name, err)
			}
		}
		r.Name = name
		file[name] = r
	}
	return file, nil
}

// checkDevicePattern checks one device path or glob.
func checkDevicePattern(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("device pattern %q is not an absolute path", p)
	}
	if _, err := filepath.Match(p, ""); err != nil {
		return fmt.Errorf("device pattern %q is not a valid glob: %v", p, err)
	}
	return nil
}

// LookupResource returns the resource called name. A name that is not
// configured is still a valid queue: it gets an empty device list.
func LookupResource(res map[string]Resource, name string) Resource {
	if r, ok := res[name]; ok {
		r.Name = name
		return r
	}
	return Resource{Name: name}
}

// DevicePatterns returns the device patterns a hold on res checks: override
// (the hold's --device values) when it is not empty, else the resource's own
// list. The result is a fresh slice.
func DevicePatterns(res Resource, override []string) []string {
	src := res.Devices
	if len(override) > 0 {
		src = override
	}
	return append([]string(nil), src...)
}

// CheckDeviceFlags checks --device values: each must be an absolute path or
// glob (a relative one is made absolute against the working directory).
// It returns the values to use.
func CheckDeviceFlags(devs []string) ([]string, error) {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		if d == "" {
			return nil, errors.New("--device needs a path or glob, got an empty value")
		}
		if !filepath.IsAbs(d) {
			abs, err := filepath.Abs(d)
			if err != nil {
				return nil, fmt.Errorf("--device %q: %v", d, err)
			}
			d = abs
		}
		if err := checkDevicePattern(d); err != nil {
			return nil, fmt.Errorf("--device: %v", err)
		}
		out = append(out, d)
	}
	return out, nil
}
