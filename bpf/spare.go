// spare.go owns spare lineages: copies of the programs and maps loaded
// ahead of time and pinned, unattached and unconfigured, under SpareRoot,
// so that a hold takes one in a few system calls instead of reading the
// kernel's BTF and passing the verifier while the device waits. MakeSpares
// (run detached from a hold that took or loaded its own) keeps the stock.
package bpf

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// SpareRoot holds one directory per spare, named
// <build>_<seal request>_<seal>_<unique> (bpffs refuses dots in names), and
// the host's shared iterators and device watch: hostSpareRoot, or the
// private root a test names in SpareRootEnv.
func SpareRoot() string {
	if v := os.Getenv(SpareRootEnv); validTestRoot(v) {
		return v
	}
	return hostSpareRoot
}

const hostSpareRoot = BPFFS + "/gpu-hold-spare"

// SpareRootEnv is set by tests only (internal/teststock.PrivateRoot): a
// root of their own, so that a test neither takes nor changes what the
// host's real holds use (their spares, iterators, device watch), nor what
// another package's tests use at the same time. Only a name
// BPFFS/gpu-hold-test-* counts; it is checked as the host's root is (a
// directory only root can write), so it grants nothing the host's does not.
const SpareRootEnv = "GPU_HOLD_TEST_SPARE_ROOT"

// validTestRoot reports whether v names a test's private root.
func validTestRoot(v string) bool {
	name, ok := strings.CutPrefix(v, BPFFS+"/gpu-hold-test-")
	return ok && name != "" && !strings.ContainsAny(name, "/.")
}

// SpareStock is how many spares of one seal request MakeSpares keeps.
const SpareStock = 2

// ErrNoSpare: no spare of this build and seal request is there to take.
var ErrNoSpare = errors.New("no spare lineage to take")

var spareProgs = []string{"prog_exit", "prog_exec", "prog_fork"}

// spareBuild names this build's programs: a spare or shared iterator that
// another build of gpu-hold pinned (before an upgrade) has other programs
// and maps, and is never used.
var spareBuild = sync.OnceValue(func() string {
	h := fnv.New64a()
	for _, obj := range [][]byte{_LineageBytes, _LineageNokfuncBytes, _DevscanBytes, _GroupsBytes, _DevwatchBytes} {
		h.Write(obj)
	}
	return fmt.Sprintf("%016x", h.Sum64())
})

// sealRequest is what the environment asks of the seal: a spare made
// under one request is taken only under the same one.
func sealRequest() (string, error) {
	switch env := os.Getenv(SealEnv); env {
	case "", "auto":
		return "auto", nil
	case "fork", "birth":
		return env, nil
	default:
		return "", fmt.Errorf("%s=%q: use fork, birth or auto, or unset it", SealEnv, env)
	}
}

func sparePrefix(req string) string { return spareBuild() + "_" + req + "_" }

// TakeSpare claims a spare, names holdID in it and attaches it: the same
// lineage Load would return. ErrNoSpare when there is none to take.
func TakeSpare(holdID string) (*Lineage, error) {
	if !validHoldID(holdID) {
		return nil, fmt.Errorf("hold id %q: use letters, digits, '.', '_' and '-' only", holdID)
	}
	req, err := sealRequest()
	if err != nil {
		return nil, err
	}
	names, err := spareNames()
	if err != nil {
		return nil, err
	}
	last := ErrNoSpare
	for _, name := range names {
		seal, ok := spareSeal(name, req)
		if !ok {
			continue
		}
		claimed := filepath.Join(SpareRoot(), "taken_"+uniqueName())
		if os.Rename(filepath.Join(SpareRoot(), name), claimed) != nil {
			continue // another hold took it first
		}
		l, err := openSpare(claimed, seal)
		removeSpareDir(claimed) // open descriptors keep the objects
		if err != nil {
			last = err
			continue
		}
		l.req = req
		return l.begin(holdID)
	}
	return nil, last
}

// spareNames lists SpareRoot after checking that only root can write it
// (what is pinned there is attached as root's own).
func spareNames() ([]string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(SpareRoot(), &st); err != nil {
		return nil, ErrNoSpare
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%s is not a directory only root can write: remove it (the next hold remakes it)", SpareRoot())
	}
	d, err := os.Open(SpareRoot())
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// spareSeal parses a spare's name: its seal, and whether it is of this
// build and seal request.
func spareSeal(name, req string) (SealMode, bool) {
	rest, ok := strings.CutPrefix(name, sparePrefix(req))
	if !ok {
		return "", false
	}
	seal, _, _ := strings.Cut(rest, "_")
	switch m := SealMode(seal); m {
	case SealBirth, SealFork:
		return m, true
	}
	return "", false
}

// uniqueName is a name no other process makes at the same time.
func uniqueName() string {
	return strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// openSpare opens a claimed spare's pins, and checks that nothing has ever
// run in it.
func openSpare(dir string, seal SealMode) (_ *Lineage, err error) {
	l := &Lineage{seal: seal, spare: true}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if err := l.openPinnedMaps(dir, "spare"); err != nil {
		return nil, err
	}
	progs := []**ebpf.Program{&l.progs.OnExit, &l.progs.OnExec, &l.progs.OnFork}
	for i, name := range spareProgs {
		p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, name), nil)
		if err != nil {
			return nil, fmt.Errorf("opening spare program %s: %w", name, err)
		}
		*progs[i] = p
	}
	if err := l.openSpareLinks(dir); err != nil {
		return nil, err
	}
	return l, l.checkPristine()
}

// openSpareLinks opens the spare's pinned links: all of them, or none (a
// spare pinned unattached, which begin attaches).
func (l *Lineage) openSpareLinks(dir string) error {
	for _, name := range pinLinks {
		lk, err := link.LoadPinnedLink(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) && len(l.links) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("opening spare link %s: %w", name, err)
		}
		l.links = append(l.links, lk)
	}
	return nil
}

// checkPristine refuses a lineage that is not as a fresh load leaves it: a
// config ever written (a seal left set would kill the next payload's
// children at birth), a counter moved, a member in the map or an event
// unread. A recycled spare (Recycle) must pass it as a made one does.
func (l *Lineage) checkPristine() error {
	c, err := l.readConfig()
	if err != nil {
		return err
	}
	s, err := l.readState()
	if err != nil {
		return err
	}
	empty, err := l.lineageEmpty()
	if err != nil {
		return err
	}
	unread, err := l.unreadBytes()
	if err != nil {
		return err
	}
	if c != (lineageHoldConfig{}) || s != (lineageHoldState{}) || !empty || unread != 0 {
		return errors.New("a spare lineage was used before: not taken")
	}
	return nil
}

// removeSpareDir removes a spare's pins and its directory.
func removeSpareDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, name := range names {
			os.Remove(filepath.Join(dir, name))
		}
	}
	os.Remove(dir)
}

// lineageEmpty reports whether the lineage map holds no member.
func (l *Lineage) lineageEmpty() (bool, error) {
	var k uint32
	err := l.maps.Lineage.NextKey(nil, &k)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the lineage map: %w", err)
	}
	return false, nil
}
