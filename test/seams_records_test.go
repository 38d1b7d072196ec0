// seams_records_test.go owns the multi-user tests of records read and
// pruned across users (issue 44 items 3 and 7): show says whose file a
// record is, and a job's retention flags prune only its own user's records
// while the admin's settings file prunes the fleet's.
package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// srFleet is tfFleet, which makes records/ as the admin does, so that no
// user's hold owns it, whichever runs first.
func srFleet(t *testing.T) *fleet {
	t.Helper()
	return tfFleet(t)
}

// srRecords lists the records in the fleet's gpu records dir by owner.
func srRecords(t *testing.T, f *fleet) map[int][]string {
	t.Helper()
	dir := filepath.Join(f.Dir, "gpu", "records")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	by := map[int][]string{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		by[int(st.Uid)] = append(by[int(st.Uid)], e.Name())
	}
	return by
}

// srCounts says how many records each of root, A and B has.
func srCounts(by map[int][]string) string {
	return fmt.Sprintf("root %d, A %d, B %d", len(by[0]), len(by[uidA]), len(by[uidB]))
}

// srRequire fails unless the records per owner are want (as srCounts).
func srRequire(t *testing.T, f *fleet, what, want string, rs ...result) {
	t.Helper()
	if got := srCounts(srRecords(t, f)); got != want {
		var errs []string
		for _, r := range rs {
			errs = append(errs, r.Stderr)
		}
		t.Errorf("%s: records %s, want %s\nstderr of the last holds:\n%s", what, got, want, strings.Join(errs, "\n---\n"))
	}
}

// srHolds runs one `true` hold of each rig in turn.
func srHolds(t *testing.T, f *fleet, mark string, rgs ...rig) {
	t.Helper()
	for _, rg := range rgs {
		tfRun(t, f, rg, mark, nil, "true")
	}
	if t.Failed() {
		t.FailNow()
	}
}

// srSettings writes the fleet's settings file as cred (nil: root), 0644.
func srSettings(t *testing.T, f *fleet, mark string, cred *syscall.Credential, text string) string {
	t.Helper()
	p := filepath.Join(f.Dir, "settings.json")
	tfSh(t, cred, mark, fmt.Sprintf("umask 022; rm -f %[1]s; printf '%%s' '%[2]s' > %[1]s", p, text))
	return p
}

// T2 (issue 44 item 3): a record B planted or rewrote naming root as its
// holder. show must say, from the file's owner, that B wrote it and that
// it is not the holder's: in the tree's first line, in json's writer and
// in the timeline's otherData; a genuine record says nothing alarming.
//
// Catches: show rendering the content's "holder ... uid 0" with no word
// about who wrote the file.
func TestShowSaysWhoWroteRecord(t *testing.T) {
	t.Parallel()
	f := srFleet(t)
	mark := newMark(t)
	genuine := recordOf(t, tfRun(t, f, f.Root, mark, nil, "true").Stderr)
	mineB := recordOf(t, tfRun(t, f, f.B, mark, nil, "true").Stderr)
	if t.Failed() {
		t.FailNow()
	}
	recs := filepath.Dir(genuine)
	// Planted: root's record copied by B under a name of its own.
	planted := filepath.Join(recs, "20990101T000000-forged.jsonl")
	tfSh(t, f.B.Cred, mark, fmt.Sprintf("umask 022; cat %s > %s", genuine, planted))
	// Rewritten: B's own record made to name root as its holder.
	tfSh(t, f.B.Cred, mark, fmt.Sprintf(`sed 's/"uid":%d/"uid":0/g' %[2]s > %[2]s.new && cat %[2]s.new > %[2]s && rm %[2]s.new`, uidB, mineB))
	tfRequirePlanted(t, planted, unix.S_IFREG, uidB)
	warn := fmt.Sprintf("warning: record written by uid %d, not by the holder it names, uid 0 (root): its content is that user's claim", uidB)
	for _, c := range []struct {
		name, path string
		forged     bool
		file       string
	}{
		{"genuine-root", genuine, false, "file: written by uid 0 (root), the holder it names"},
		{"genuine-B", "", false, fmt.Sprintf("file: written by uid %d, the holder it names", uidB)},
		{"planted-by-B", planted, true, ""},
		{"rewritten-by-B", mineB, true, ""},
	} {
		if c.name == "genuine-B" {
			c.path = recordOf(t, tfRun(t, f, f.B, mark, nil, "true").Stderr)
		}
		// Shown by a third user, A: any reader must be told.
		out, err := asUser(t, f.A.Cred, mark, bin, "show", "--color=never", c.path)
		if err != nil {
			t.Errorf("%s: show as uid A: %v\n%s", c.name, err, out)
			continue
		}
		first, _, _ := strings.Cut(out, "\n")
		switch {
		case c.forged && first != warn:
			t.Errorf("%s: show's first line is %q, want %q\n%s", c.name, first, warn, out)
		case !c.forged && (strings.Contains(out, "warning") || strings.Contains(out, "claim") || !strings.Contains(out, c.file)):
			t.Errorf("%s: show of a genuine record warns, or does not say %q:\n%s", c.name, c.file, out)
		}
		doc := ghRun(t, "show", "--format=json", c.path)
		var d struct {
			Writer *struct {
				UID       int  `json:"uid"`
				HolderUID int  `json:"holder_uid"`
				NotHolder bool `json:"not_holder"`
			} `json:"writer"`
		}
		if err := json.Unmarshal([]byte(doc.Stdout), &d); err != nil || d.Writer == nil || d.Writer.NotHolder != c.forged || (c.forged && (d.Writer.UID != uidB || d.Writer.HolderUID != 0)) {
			t.Errorf("%s: show --format json: writer %+v (%v), want not_holder %v\n%s", c.name, d.Writer, err, c.forged, doc.Stdout)
		}
		tl := ghRun(t, "show", "--format=timeline", c.path)
		var tr struct{ OtherData map[string]any }
		if err := json.Unmarshal([]byte(tl.Stdout), &tr); err != nil || tr.OtherData["record_not_holder"] != c.forged {
			t.Errorf("%s: show --format timeline: otherData %v (%v), want record_not_holder %v", c.name, tr.OtherData, err, c.forged)
		}
	}
	requireNoneLeft(t, mark)
}

// Issue 44 item 7: whose records a hold's retention removes. A job's
// --keep-records/--record-age prune its own user's records only (root's
// hold: root's); every user's go only by the admin's settings.json,
// applied by root (its holds and gpu-hold reap); a settings file root does
// not vouch for is ignored and reported; a negative --keep-records is
// refused.
//
// Catches: a root hold's flags pruning the whole fleet's records (root
// may unlink anything in the sticky records dir); no fleet retention at
// all; a user's settings file believed; --keep-records -1 accepted.
func TestRecordRetentionByOwner(t *testing.T) {
	t.Parallel()
	t.Run("root-flags-prune-root-only", func(t *testing.T) {
		t.Parallel()
		f := srFleet(t)
		mark := newMark(t)
		srHolds(t, f, mark, f.Root, f.A, f.B, f.A, f.B)
		srRequire(t, f, "before", "root 1, A 2, B 2")
		r := tfRun(t, f, f.Root, mark, []string{"--keep-records", "1"}, "true")
		srRequire(t, f, "after root's --keep-records 1", "root 1, A 2, B 2", r)
		requireNoneLeft(t, mark)
	})
	t.Run("user-flags-prune-own-only", func(t *testing.T) {
		t.Parallel()
		f := srFleet(t)
		mark := newMark(t)
		srHolds(t, f, mark, f.Root, f.A, f.B, f.A, f.B)
		r := tfRun(t, f, f.A, mark, []string{"--keep-records", "1"}, "true")
		srRequire(t, f, "after A's --keep-records 1", "root 1, A 1, B 2", r)
		requireNoneLeft(t, mark)
	})
	t.Run("admin-settings-prune-fleet", func(t *testing.T) {
		t.Parallel()
		f := srFleet(t)
		mark := newMark(t)
		srHolds(t, f, mark, f.Root, f.A, f.B, f.A, f.B)
		srSettings(t, f, mark, nil, `{"records": {"keep": 2}}`)
		srHolds(t, f, mark, f.A)
		r := tfRun(t, f, f.Root, mark, nil, "true")
		// Each user's two newest.
		srRequire(t, f, "after a root hold under the admin's keep 2", "root 2, A 2, B 2", r)
		// gpu-hold reap (the root timer) applies it too.
		srHolds(t, f, mark, f.A, f.B)
		srSettings(t, f, mark, nil, `{"records": {"keep": 1}}`)
		rr := ghRun(t, "reap", "--all", "--dir", f.Dir)
		if rr.Code != 0 {
			t.Errorf("reap --all: exit %d\n%s", rr.Code, rr.Stderr)
		}
		srRequire(t, f, "after root's reap under the admin's keep 1", "root 1, A 1, B 1", rr)
		// A user's hold does not apply the fleet's retention.
		srHolds(t, f, mark, f.A)
		srRequire(t, f, "after A's hold under the admin's keep 1", "root 1, A 2, B 1")
		requireNoneLeft(t, mark)
	})
	t.Run("user-settings-ignored", func(t *testing.T) {
		t.Parallel()
		f := srFleet(t)
		mark := newMark(t)
		srHolds(t, f, mark, f.Root, f.A, f.B)
		p := srSettings(t, f, mark, f.A.Cred, `{"records": {"keep": 1}}`)
		tfRequirePlanted(t, p, unix.S_IFREG, uidA)
		r := tfRun(t, f, f.Root, mark, nil, "true")
		srRequire(t, f, "after a root hold under A's settings.json", "root 2, A 1, B 1", r)
		tfRequireWarned(t, "A's settings.json", []result{r}, p)
		rr := ghRun(t, "reap", "--all", "--dir", f.Dir)
		srRequire(t, f, "after root's reap under A's settings.json", "root 2, A 1, B 1", rr)
		if !strings.Contains(rr.Stderr, p) || !strings.Contains(rr.Stderr, fmt.Sprintf("owned by uid %d", uidA)) {
			t.Errorf("reap does not report A's settings.json:\n%s", rr.Stderr)
		}
		requireNoneLeft(t, mark)
	})
	t.Run("negative-keep-refused", func(t *testing.T) {
		t.Parallel()
		f := srFleet(t)
		mark := newMark(t)
		for _, rg := range []rig{f.Root, f.A} {
			r := tfStart(t, f, rg, mark, []string{"--keep-records", "-1"}, "true").Wait(tfBound)
			if r.Code != 125 || !strings.Contains(r.Stderr, "--keep-records must not be negative") {
				t.Errorf("%s's --keep-records -1: exit %d, want 125 saying it must not be negative\nstderr:\n%s", rg.Name, r.Code, r.Stderr)
			}
		}
		srRequire(t, f, "after refused holds", "root 0, A 0, B 0")
		requireNoneLeft(t, mark)
	})
}
