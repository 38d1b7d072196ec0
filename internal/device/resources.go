// resources.go owns the resources a hold can queue for and the device nodes
// that mean "holds this device": built-in defaults (gpu, npu), the optional
// <queue dir>/resources.json that overrides them, and --device, which replaces
// a resource's list for one hold. resources.json counts only from root or
// the queue dir's owner (see LoadResourcesWarn).
package device

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

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
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
	// Pool replaces the discovered pool (see PoolConfig); nil: discover.
	Pool *PoolConfig `json:"pool,omitempty"`
}

// DefaultResources returns the built-in resources: gpu (NVIDIA and AMD nodes)
// and npu (accel nodes).
func DefaultResources() map[string]Resource {
	return map[string]Resource{
		"gpu": {Name: "gpu", Devices: []string{"/dev/nvidia*", "/dev/kfd", "/dev/dri/renderD*"}},
		"npu": {Name: "npu", Devices: []string{"/dev/accel/accel*"}},
	}
}

// maxResourcesLen bounds what is read of resources.json.
const maxResourcesLen = 1 << 20

// LoadResources is LoadResourcesWarn with its warnings written to standard
// error. Callers with a logger should call LoadResourcesWarn.
func LoadResources(queueDir string) (map[string]Resource, error) {
	return LoadResourcesWarn(queueDir, nil)
}

// LoadResourcesWarn returns the resources for queue dir queueDir: the
// defaults, overridden entry by entry by queueDir/resources.json when that
// file exists and is trusted. A missing file is not an error; an unreadable
// or malformed trusted one is, and the error names the file. The file is
// opened never through a symlink and without blocking, and counts only
// when it is a regular file owned by root or by the queue dir's owner that
// nobody else can write: otherwise any user of a shared queue dir could
// switch the device-holder check off by listing no devices. An untrusted or
// special file is reported in one line to warn (nil: standard error) and
// the defaults are used.
func LoadResourcesWarn(queueDir string, warn func(msg string)) (map[string]Resource, error) {
	res := DefaultResources()
	if queueDir == "" {
		return res, nil
	}
	if warn == nil {
		warn = func(msg string) { fmt.Fprintln(os.Stderr, "gpu-hold: warning: "+msg) }
	}
	path := filepath.Join(queueDir, ResourcesFile)
	data, err := readResources(queueDir)
	var ut *untrustedError
	switch {
	case errors.Is(err, unix.ENOENT):
		return res, nil
	case errors.As(err, &ut):
		warn(ut.Error())
		return res, nil
	case err != nil:
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

// untrustedError: resources.json is there but must not count.
type untrustedError struct {
	path   string
	reason string
}

func (e *untrustedError) Error() string {
	return fmt.Sprintf("ignoring resource config %s: %s; using the built-in resources. An admin can make it count with: chown root: %s; chmod 644 %s",
		e.path, e.reason, e.path, e.path)
}

// readResources reads queueDir's resources.json when it is trusted (an
// *untrustedError when it is not).
func readResources(queueDir string) ([]byte, error) {
	data, _, err := safefs.ReadTrusted(queueDir, ResourcesFile, maxResourcesLen, trustResources)
	return data, err
}

// trustResources says why st must not count, or nil.
func trustResources(st safefs.Info, dirOwner uint32) error {
	switch {
	case !st.IsRegular():
		return &untrustedError{st.Path, fmt.Sprintf("it is %s owned by uid %d (never followed or opened; remove it)", st.Kind(), st.UID)}
	case st.UID != 0 && st.UID != dirOwner:
		return &untrustedError{st.Path, fmt.Sprintf("it is owned by uid %d (mode %04o), and only root or the queue dir's owner (uid %d) may configure the device checks", st.UID, st.Perm(), dirOwner)}
	case st.WritableByOthers():
		return &untrustedError{st.Path, fmt.Sprintf("its mode %04o (owner uid %d) lets others write it, so they could switch the device checks off", st.Perm(), st.UID)}
	}
	return nil
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
		if r.Pool != nil {
			if err := r.Pool.check(); err != nil {
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

// Patterns returns the device patterns a hold on res checks: override
// (the hold's --device values) when it is not empty, else the resource's own
// list. The result is a fresh slice.
func Patterns(res Resource, override []string) []string {
	src := res.Devices
	if len(override) > 0 {
		src = override
	}
	return append([]string(nil), src...)
}

// CheckFlags checks --device values: each must be an absolute path or
// glob (a relative one is made absolute against the working directory).
// It returns the values to use.
func CheckFlags(devs []string) ([]string, error) {
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
