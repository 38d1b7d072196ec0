// safefs_test.go tests every operation against what another user can plant
// in a shared directory: a symlink (to a file outside, or dangling), a
// FIFO, a device node, a hard link. Nothing blocks, nothing is followed,
// nothing outside the directory is written, and the error says what the
// file is and whose.
package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// planted makes a directory holding one of each hostile file, and a
// victim file outside it that they point at.
func planted(t *testing.T) (d *Dir, victim string) {
	t.Helper()
	dir := t.TempDir()
	victim = filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, filepath.Join(dir, "symlink"))
	os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling"))
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := unix.Mknod(filepath.Join(dir, "device"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "subdir"), 0o755)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, victim
}

func kept(t *testing.T, d *Dir, victim string) {
	t.Helper()
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the file outside the directory was written: %q", b)
	}
	if _, err := os.Lstat(d.Join("nowhere")); err == nil {
		t.Fatal("a dangling symlink's target was created")
	}
}

var special = map[string]string{"symlink": "a symlink", "dangling": "a symlink", "fifo": "a FIFO", "device": "a device node", "subdir": "a directory"}

func TestOpenRefusesSpecialFiles(t *testing.T) {
	d, victim := planted(t)
	for name, kind := range special {
		if name == "device" && os.Geteuid() != 0 {
			continue
		}
		for _, flags := range []int{unix.O_RDONLY, unix.O_RDWR | unix.O_APPEND, unix.O_WRONLY | unix.O_TRUNC} {
			plant.Within(t, "Open "+name, func() {
				f, _, err := d.Open(name, flags)
				if err == nil {
					f.Close()
				}
				var nr *NotRegularError
				if !errors.As(err, &nr) {
					t.Fatalf("Open %s: %v, want a *NotRegularError", name, err)
				}
				plant.Says(t, err, "the error", d.Join(name), kind, "owned by uid ")
			})
		}
	}
	kept(t, d, victim)
}

// A hard-linked file may be read (its owner says whose it is) but never
// written: the write would reach the other names too.
func TestOpenHardLink(t *testing.T) {
	d, victim := planted(t)
	f, st, err := d.Open("hardlink", unix.O_RDONLY)
	if err != nil {
		t.Fatalf("reading a hard link: %v", err)
	}
	f.Close()
	if st.Nlink != 2 {
		t.Fatalf("nlink %d, want 2", st.Nlink)
	}
	for _, flags := range []int{unix.O_WRONLY, unix.O_RDWR | unix.O_APPEND, unix.O_WRONLY | unix.O_TRUNC} {
		_, _, err := d.Open("hardlink", flags)
		var le *LinkedError
		if !errors.As(err, &le) {
			t.Fatalf("writing a hard link (flags %#x): %v, want a *LinkedError", flags, err)
		}
		plant.Says(t, err, "the error", "hard link", "2 links")
	}
	kept(t, d, victim)
}

func TestCreateNeverFollowsOrTruncates(t *testing.T) {
	d, victim := planted(t)
	for _, name := range []string{"symlink", "dangling", "fifo", "device", "hardlink", "subdir"} {
		if name == "device" && os.Geteuid() != 0 {
			continue
		}
		plant.Within(t, "Create "+name, func() {
			f, _, err := d.Create(name, unix.O_WRONLY|unix.O_TRUNC, 0o644)
			if err == nil {
				f.Close()
			}
			var ee *ExistsError
			if !errors.As(err, &ee) {
				t.Fatalf("Create over %s: %v, want an *ExistsError", name, err)
			}
			plant.Says(t, err, "the error", d.Join(name), "already exists", "uid ")
		})
	}
	kept(t, d, victim)
}

// The mode is set exactly: a umask must not keep a shared file's group out.
func TestCreateModeIgnoresUmask(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	d, _ := planted(t)
	f, st, err := d.Create("new", unix.O_WRONLY, 0o664)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st.Perm() != 0o664 || !st.IsRegular() || st.Nlink != 1 || st.UID != uint32(os.Geteuid()) {
		t.Fatalf("created %+v, want a regular 0664 file of ours", st)
	}
	sub, created, err := d.MkdirSub("shared", 0o3775, os.Getegid())
	if err != nil || !created {
		t.Fatalf("MkdirSub: %v, created %v", err, created)
	}
	defer sub.Close()
	if st, _ := sub.Stat(); st.Perm() != 0o3775 {
		t.Fatalf("dir mode %04o, want 3775", st.Perm())
	}
}

func TestOpenOrCreate(t *testing.T) {
	d, victim := planted(t)
	f, _, created, err := d.OpenOrCreate("lock", unix.O_RDONLY, 0o664)
	if err != nil || !created {
		t.Fatalf("first: %v, created %v", err, created)
	}
	f.Close()
	f, _, created, err = d.OpenOrCreate("lock", unix.O_RDONLY, 0o664)
	if err != nil || created {
		t.Fatalf("second: %v, created %v", err, created)
	}
	f.Close()
	for _, name := range []string{"symlink", "dangling", "fifo"} {
		plant.Within(t, "OpenOrCreate "+name, func() {
			_, _, _, err := d.OpenOrCreate(name, unix.O_RDWR, 0o664)
			plant.Says(t, err, "the error", d.Join(name), special[name])
		})
	}
	kept(t, d, victim)
}

func TestReadFile(t *testing.T) {
	d, _ := planted(t)
	os.WriteFile(d.Join("small"), []byte("12345"), 0o644)
	if b, st, err := d.ReadFile("small", 5); err != nil || string(b) != "12345" || st.Size != 5 {
		t.Fatalf("ReadFile: %q %v", b, err)
	}
	if _, _, err := d.ReadFile("small", 4); err == nil {
		t.Fatal("a file over the bound was read")
	}
	plant.Within(t, "ReadFile fifo", func() {
		_, _, err := d.ReadFile("fifo", 10)
		plant.Says(t, err, "the error", "a FIFO")
	})
}

func TestSubNeverFollows(t *testing.T) {
	d, _ := planted(t)
	target := t.TempDir()
	os.Symlink(target, d.Join("dirlink"))
	for name, kind := range map[string]string{"dirlink": "a symlink", "fifo": "a FIFO", "hardlink": "a regular file"} {
		plant.Within(t, "Sub "+name, func() {
			_, err := d.Sub(name)
			plant.Says(t, err, "the error", d.Join(name), kind, "not a directory")
		})
		_, _, err := d.MkdirSub(name, 0o3775, -1)
		plant.Says(t, err, "the error", d.Join(name), kind)
	}
	if _, err := OpenDir(filepath.Dir(d.Path()), filepath.Base(d.Path()), "dirlink"); err == nil {
		t.Fatal("OpenDir followed a symlink below its base")
	}
	sub, err := OpenDir(filepath.Dir(d.Path()), filepath.Base(d.Path()), "subdir")
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
}

// Remove leaves a name alone once it is another file than the one checked.
func TestRemoveOnlyTheFileChecked(t *testing.T) {
	d, _ := planted(t)
	os.WriteFile(d.Join("r"), nil, 0o644)
	os.Link(d.Join("r"), d.Join("keep")) // its inode number stays taken
	st, _ := d.Lstat("r")
	os.Remove(d.Join("r"))
	os.WriteFile(d.Join("other"), nil, 0o644)
	os.Rename(d.Join("other"), d.Join("r")) // a new inode under the name
	if err := d.Remove("r", st); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lstat("r"); err != nil {
		t.Fatal("the replacement was removed")
	}
	st, _ = d.Lstat("r")
	if err := d.Remove("r", st); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lstat("r"); err == nil {
		t.Fatal("the file checked was not removed")
	}
}

func TestDeviceNeedsRoot(t *testing.T) {
	testenv.NeedRoot(t, "making a device node (mknod)")
	d, _ := planted(t)
	st, err := d.Lstat("device")
	if err != nil || st.Kind() != "a device node" {
		t.Fatalf("device: %v %v", st.Kind(), err)
	}
}

// CreateOrTruncate rewrites only our own single-link regular file.
func TestCreateOrTruncate(t *testing.T) {
	d, victim := planted(t)
	f, _, err := d.CreateOrTruncate("out", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("first")
	f.Close()
	f, _, err = d.CreateOrTruncate("out", 0o644)
	if err != nil {
		t.Fatalf("our own file: %v", err)
	}
	f.Close()
	if b, _ := os.ReadFile(d.Join("out")); len(b) != 0 {
		t.Fatalf("our own file was not truncated: %q", b)
	}
	for name, kind := range map[string]string{"symlink": "a symlink", "dangling": "a symlink", "fifo": "a FIFO", "hardlink": "hard link"} {
		plant.Within(t, "CreateOrTruncate "+name, func() {
			_, _, err := d.CreateOrTruncate(name, 0o644)
			plant.Says(t, err, "the error", d.Join(name), kind)
		})
	}
	if os.Geteuid() == 0 {
		os.WriteFile(d.Join("theirs"), []byte("theirs"), 0o666)
		os.Chown(d.Join("theirs"), 4242, 4242)
		_, _, err := d.CreateOrTruncate("theirs", 0o644)
		plant.Says(t, err, "the error", "belongs to uid 4242", "never truncated")
		if b, _ := os.ReadFile(d.Join("theirs")); string(b) != "theirs" {
			t.Fatal("another user's file was truncated")
		}
	}
	kept(t, d, victim)
}

// A user's path is followed through root's and the caller's own symlinks,
// never through another user's.
func TestOpenUserDir(t *testing.T) {
	base := t.TempDir()
	target := t.TempDir()
	os.Symlink(target, filepath.Join(base, "mine"))
	d, err := OpenUserDir(filepath.Join(base, "mine"), 0)
	if err != nil {
		t.Fatalf("our own symlink: %v", err)
	}
	d.Close()
	d, err = OpenUserDir(filepath.Join(base, "made", "deeper"), 0o755)
	if err != nil {
		t.Fatalf("making missing components: %v", err)
	}
	d.Close()
	if _, err := OpenUserDir(filepath.Join(base, "missing"), 0); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("a missing dir with no mkdir: %v", err)
	}
	testenv.NeedRoot(t, "a symlink owned by another uid")
	theirs := filepath.Join(base, "theirs")
	os.Symlink(target, theirs)
	if err := os.Lchown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{theirs, filepath.Join(theirs, "sub")} {
		_, err := OpenUserDir(p, 0o755)
		plant.Says(t, err, "the error", theirs, "a symlink owned by uid 4242", "never followed")
	}
	if es, _ := os.ReadDir(target); len(es) != 0 {
		t.Fatal("a directory was made through another user's symlink")
	}
}
