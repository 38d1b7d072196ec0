// record_writer.go owns whose a record read back is: its file's owner, from
// the fstat of the fd it was read through (never from its content), set
// beside the holder the content names, and the plain words that say when
// the two differ, for every rendering of the record.
package record

import "fmt"

// Writer is whose file a record is, beside the holder it names.
type Writer struct {
	// UID owns the file: the user who wrote it.
	UID  int    `json:"uid"`
	User string `json:"user,omitempty"`
	// HolderUID is the uid the record's content names (hold.uid).
	HolderUID  int    `json:"holder_uid"`
	HolderUser string `json:"holder_user,omitempty"`
	// NotHolder says the file's owner is not the holder it names: what the
	// record says is that owner's claim, not the holder's evidence.
	NotHolder bool `json:"not_holder"`
	// Warning says so in words (empty when the owner is the holder).
	Warning string `json:"warning,omitempty"`
}

// SetWriter sets r.Writer from r.File, naming each uid with name (nil, or
// "": unnamed). A record not read from a file (File unset) gets none.
func (r *Record) SetWriter(name func(uid int) string) {
	if r.File.Path == "" {
		return
	}
	if name == nil {
		name = func(int) string { return "" }
	}
	w := &Writer{UID: int(r.File.UID), HolderUID: r.Hold.UID}
	w.User, w.HolderUser = name(w.UID), name(w.HolderUID)
	w.NotHolder = w.UID != w.HolderUID
	if w.NotHolder {
		w.Warning = fmt.Sprintf("record written by %s, not by the holder it names, %s: its content is that user's claim",
			uidName(w.UID, w.User), uidName(w.HolderUID, w.HolderUser))
	}
	r.Writer = w
}

// uidName is "uid 1001 (bob)", or "uid 1001" with no name; the name made
// safe to print.
func uidName(uid int, name string) string {
	if name == "" {
		return fmt.Sprintf("uid %d", uid)
	}
	return fmt.Sprintf("uid %d (%s)", uid, clip(name, 64))
}

// Owner says whose file the record is, in words: "uid 1000 (alice), the
// holder's own", or the warning.
func (w *Writer) Owner() string {
	if w.NotHolder {
		return w.Warning
	}
	return "written by " + uidName(w.UID, w.User) + ", the holder it names"
}
