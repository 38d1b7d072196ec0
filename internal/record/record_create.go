// record_create.go owns making a record: where it may go (a records dir
// or a --dump directory that only root and its user control), and
// creating it O_EXCL there, under a fresh name when its usual one was
// taken by someone who read the hold's ticket first.
package record

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// RecordsDirMode is the mode a records directory is made with, set
// exactly (the umask would keep the group out): every member of the queue
// directory's group creates its own record there (setgid keeps the group),
// and nobody removes another's (sticky).
const RecordsDirMode = 0o3775

// recordMode is a record file's mode: a record is evidence written by its
// holder, so nobody else may rewrite it; everyone may read it (show).
const recordMode = 0o644

// CreateRecord creates the record at path, a path the caller chose
// (--dump): its directory is opened component by component, following a
// symlink on the way only when root or this uid owns it (never one another
// user planted), and made when missing; the file is created
// O_EXCL|O_NOFOLLOW, so whatever is there already (a file, a symlink, a
// FIFO) is an error that says what it is, and nothing is followed or
// truncated.
func CreateRecord(path string, h HoldInfo) (*RecordWriter, error) {
	d, err := openDumpDir(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return CreateRecordAt(d, filepath.Base(path), h)
}

// CheckDump says, before a hold queues, why CreateRecord could not make
// the record at path: its directory cannot be opened or is another
// user's, or something is there already.
func CheckDump(path string) error {
	d, err := openDumpDir(path)
	if err != nil {
		return err
	}
	defer d.Close()
	if st, err := d.Lstat(filepath.Base(path)); err == nil {
		return fmt.Errorf("record %w; each hold needs a record of its own", &safefs.ExistsError{Info: st})
	}
	return nil
}

// openDumpDir opens the directory of a --dump path (see CreateRecord)
// when it is one that only root and this uid control: another user who
// owns it, or anyone when it is world-writable without the sticky bit,
// could rename the record away and put a forged one in its place.
func openDumpDir(path string) (*safefs.Dir, error) {
	d, err := safefs.OpenUserDir(filepath.Dir(path), 0o755)
	if err != nil {
		return nil, fmt.Errorf("cannot open the directory of record %s: %v; write the record elsewhere (--dump)", path, err)
	}
	st, err := d.Stat()
	if err == nil {
		if why := untrustedDir(st, 0o002); why != "" {
			err = &UntrustedDirError{Path: d.Path(), Why: why, Fix: "write the record in a directory of your own or root's (--dump)"}
		}
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// UntrustedDirError: the directory a record would be made in is one
// another user controls. Whoever owns a directory, or may write it
// without the sticky bit, can rename a record in it away and put a forged
// one in its place, so no record is made there.
type UntrustedDirError struct{ Path, Why, Fix string }

func (e *UntrustedDirError) Error() string {
	return fmt.Sprintf("%s %s, so a record there could be renamed away and a forged one put in its place: %s", e.Path, e.Why, e.Fix)
}

// untrustedDir says why a directory (st) is not one a record may be made
// in: "" when root, this uid or one of owners owns it and, when the bits
// of shared (0o022: group or others; 0o002: others) let anyone else write
// it, it is sticky.
func untrustedDir(st safefs.Info, shared uint32, owners ...uint32) string {
	if st.UID != 0 && int(st.UID) != geteuid() && !slices.Contains(owners, st.UID) {
		return fmt.Sprintf("belongs to uid %d", st.UID)
	}
	if st.Mode&shared != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Sprintf("has mode %04o (writable by others, not sticky)", st.Perm())
	}
	return ""
}

// OpenRecordsDir opens resourceDir/records, never through a symlink (nor
// resourceDir's own last component), making it when missing with
// RecordsDirMode and group gid (the queue directory's; -1 keeps what mkdir
// gave). A records dir of ours with another mode (made by an older
// gpu-hold, under a umask) gets RecordsDirMode. A records dir that
// another user owns (root, this uid and the resource dir's owner are
// trusted), or that its group may write without the sticky bit, is an
// *UntrustedDirError: its owner, or its group, could rename any record
// in it away and put a forged one in its place.
func OpenRecordsDir(resourceDir string, gid int) (*safefs.Dir, error) {
	res, err := safefs.OpenDirNoFollow(resourceDir)
	if err != nil {
		return nil, fmt.Errorf("cannot open resource dir %s: %v", resourceDir, err)
	}
	defer res.Close()
	d, created, err := res.MkdirSub("records", RecordsDirMode, gid)
	if err != nil {
		return nil, recordsDirErr(res.Join("records"), gid, err)
	}
	st, err := d.Stat()
	if err == nil && !created && int(st.UID) == geteuid() {
		mendRecordsDir(d, st, gid)
		st, err = d.Stat()
	}
	if err == nil {
		err = trustRecordsDir(res, st, gid)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// trustRecordsDir is OpenRecordsDir's check of the records dir st in
// resource dir res.
func trustRecordsDir(res *safefs.Dir, st safefs.Info, gid int) error {
	rst, err := res.Stat()
	if err != nil {
		return err
	}
	why := untrustedDir(st, 0o022, rst.UID)
	switch {
	case why == "":
		return nil
	case st.UID == 0 || int(st.UID) == geteuid() || st.UID == rst.UID:
		return &UntrustedDirError{Path: st.Path, Why: why, Fix: fmt.Sprintf("its owner (uid %d) or an admin can run chmod %o %s", st.UID, RecordsDirMode, st.Path)}
	}
	return &UntrustedDirError{Path: st.Path, Why: why, Fix: fmt.Sprintf("no hold of uid %d runs with its record there; an admin must remove it (rm -r %s) and make it root's: install -d -m %o -o root -g %s %s",
		geteuid(), st.Path, RecordsDirMode, groupName(gid), st.Path)}
}

// mendRecordsDir gives a records dir of ours that an older gpu-hold made
// (0755 by the umask, the creator's group) the group and mode a new one
// gets. Best effort: a dir that still works is used as it is.
func mendRecordsDir(d *safefs.Dir, st safefs.Info, gid int) {
	if gid >= 0 && int(st.GID) != gid {
		d.Chgrp(gid)
	}
	if st.Perm() != RecordsDirMode || (gid >= 0 && int(st.GID) != gid) {
		d.Chmod(RecordsDirMode) // after chgrp, which may clear setgid
	}
}

// recordsDirErr says what is wrong with a records dir and what to do.
func recordsDirErr(path string, gid int, err error) error {
	fix := fmt.Sprintf("an admin can recreate it with install -d -m %o -g %s %s", RecordsDirMode, groupName(gid), path)
	var nr *safefs.NotRegularError
	if errors.As(err, &nr) {
		return fmt.Errorf("records dir %s is %s owned by uid %d (never followed): remove it; %s", path, nr.Info.Kind(), nr.Info.UID, fix)
	}
	return fmt.Errorf("cannot make or open records dir %s as uid %d: %v; %s", path, geteuid(), err, fix)
}

// groupName names gid for a hint.
func groupName(gid int) string {
	if gid < 0 {
		return "GROUP"
	}
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// CreateRecordAt creates the record name in dir (see OpenRecordsDir) and
// writes the header h. The file must not exist (hold ids are unique); it
// is created O_EXCL|O_NOFOLLOW with mode 0644 set exactly.
func CreateRecordAt(dir *safefs.Dir, name string, h HoldInfo) (*RecordWriter, error) {
	path := dir.Join(name)
	f, st, err := dir.Create(name, unix.O_WRONLY|unix.O_APPEND, recordMode)
	if err != nil {
		var ee *safefs.ExistsError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("record %w; each hold needs its own record", err)
		}
		return nil, createErr(dir, path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		dir.Remove(name, st)
		return nil, fmt.Errorf("cannot lock new record %s: %v", path, err)
	}
	w := &RecordWriter{f: f, path: path, hold: h}
	w.hold.DroppedEvents = 0
	w.writeHoldLocked()
	if w.err != nil {
		f.Close()
		dir.Remove(name, st)
		return nil, w.err
	}
	return w, nil
}

// FreshRecordName is a name for hold id's record beside its usual one
// (RecordPath), for a hold that finds its usual name taken: someone who
// read its waiting ticket made a file there first. The hold makes it
// O_EXCL; a successor finds it by IsFreshRecordName, and believes it only
// from the holder's uid, like any record.
func FreshRecordName(id string) string {
	var b [4]byte
	rand.Read(b[:])
	return recordBase(id) + "." + hex.EncodeToString(b[:]) + ".jsonl"
}

// IsFreshRecordName reports whether name is one FreshRecordName gives id.
func IsFreshRecordName(name, id string) bool {
	mid, ok := strings.CutPrefix(name, recordBase(id)+".")
	if mid, ok = strings.CutSuffix(mid, ".jsonl"); !ok || len(mid) != 8 {
		return false
	}
	_, err := hex.DecodeString(mid)
	return err == nil
}

// FreshRecordPaths lists the regular files beside path, hold id's record
// at its usual name, that carry a fresh name of id (FreshRecordName): at
// most max, and only uid's (uid < 0: anyone's). Anyone may make names
// there; a reader still believes a record only from its holder's uid.
func FreshRecordPaths(path, id string, uid, max int) []string {
	sd, err := safefs.OpenDir(filepath.Dir(path))
	if err != nil {
		return nil
	}
	defer sd.Close()
	names, _ := sd.Names()
	var out []string
	for _, name := range names {
		if len(out) >= max {
			break
		}
		if !IsFreshRecordName(name, id) {
			continue
		}
		if st, err := sd.Lstat(name); err != nil || !st.IsRegular() || uid >= 0 && int(st.UID) != uid {
			continue
		}
		out = append(out, sd.Join(name))
	}
	return out
}

// recordBase is hold id's record name without its .jsonl.
func recordBase(id string) string {
	return strings.TrimSuffix(filepath.Base(RecordPath("", id)), ".jsonl")
}

// createErr says why a record could not be created in dir, and the fix.
func createErr(dir *safefs.Dir, path string, err error) error {
	st, serr := dir.Stat()
	if serr != nil || !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("cannot create record %s as uid %d: %v; check the directory's permissions or write the record elsewhere (--dump)", path, geteuid(), err)
	}
	group := groupName(int(st.GID))
	if parent, err := dir.Lstat(".."); err == nil {
		group = groupName(int(parent.GID)) // the queue's group, which setgid hands down
	}
	return fmt.Errorf("cannot create record %s: %s (uid %d's, group %s, mode %04o) does not let uid %d create files (%v): an admin can run chgrp %s %s && chmod %o %s, or write the record elsewhere (--dump)",
		path, dir.Path(), st.UID, groupName(int(st.GID)), st.Perm(), geteuid(), err, group, dir.Path(), RecordsDirMode, dir.Path())
}
