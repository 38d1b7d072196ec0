// admin.go owns reading an admin's file in a shared directory: a file whose
// word counts only when trust (the caller's rule: its owner, its mode, its
// links) accepts it, checked before it is opened and again on the very
// file read, so one replaced between the two does not count.
package safefs

import "errors"

// ReadTrusted reads dir/name, at most max bytes, when trust accepts it as
// seen before the open and as read; trust gets the file's Info and the
// directory's owner, and returns why the file must not count, or nil. A
// special file is never opened: trust is asked about it and its answer
// returned. Other errors are the open's or the read's.
func ReadTrusted(dir, name string, max int64, trust func(f Info, dirOwner uint32) error) ([]byte, Info, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, Info{}, err
	}
	defer d.Close()
	dst, err := d.Stat()
	if err != nil {
		return nil, Info{}, err
	}
	st, err := d.Lstat(name)
	if err != nil {
		return nil, Info{}, err
	}
	if err := trust(st, dst.UID); err != nil {
		return nil, st, err
	}
	data, fst, err := d.ReadFile(name, max)
	var nr *NotRegularError
	switch {
	case errors.As(err, &nr):
		return nil, nr.Info, trust(nr.Info, dst.UID)
	case err != nil:
		return nil, st, err
	}
	if err := trust(fst, dst.UID); err != nil {
		return nil, fst, err // replaced since the lstat
	}
	return data, fst, nil
}
