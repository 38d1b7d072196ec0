// dirconf.go owns the queue directory's settings file, <dir>/settings.json:
// what the admin sets once for every hold of the directory (today the
// records' retention), believed only from root or the directory's owner.
package dirconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// File is the name of the settings file in the queue directory.
//
// Its format is one JSON object; every key is optional, and an unknown key
// is an error, so a misspelt one is noticed instead of ignored:
//
//	{
//	  "records": {"keep": 500, "max_age": "30d"}
//	}
//
// records bounds each resource's records directory: each user's keep
// newest finished records stay (0 or absent: no count limit; counted per
// user, so that one user's many records push out nobody else's), and
// finished records older than max_age go (a Go duration such
// as "720h", or days such as "30d"; "0" or absent: no age limit). Root
// applies it (see hold.PruneFleet); a job's own flags prune only its own
// user's records.
const File = "settings.json"

// maxLen bounds what is read of the file.
const maxLen = 64 << 10

// Settings are the directory's settings; the zero value sets nothing.
type Settings struct {
	Records Retention `json:"records"`
}

// Retention bounds a records directory (see File).
type Retention struct {
	Keep   int      `json:"keep"`
	MaxAge Duration `json:"max_age"`
}

// Set says r bounds anything.
func (r Retention) Set() bool { return r.Keep > 0 || r.MaxAge > 0 }

// Duration is a duration written "720h" (Go's form) or "30d" (days).
type Duration time.Duration

// UnmarshalJSON reads a Duration; a negative one is an error.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"720h\" or \"30d\", not %s", b)
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	var v time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int64
		days, err = strconv.ParseInt(n, 10, 32)
		v = time.Duration(days) * 24 * time.Hour
	} else {
		v, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("duration %q: write it as \"720h\" or \"30d\"", s)
	case v < 0:
		return 0, fmt.Errorf("duration %q is negative: use \"0\" for no limit", s)
	}
	return v, nil
}

// UntrustedError says the file is there but does not count.
type UntrustedError struct{ Path, Why string }

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("ignoring the directory settings %s: %s; no setting of it applies. An admin can make it count with: chown root: %s; chmod 644 %s",
		e.Path, e.Why, e.Path, e.Path)
}

// Load reads queueDir's settings file. A missing file sets nothing (no
// error). The file is opened never through a symlink and without blocking,
// and counts only when it is a regular file with one link, owned by root or
// by the queue dir's owner, that nobody else can write: otherwise any user
// of a shared directory could set what applies to every user's holds. Such
// a file is an *UntrustedError, and a trusted file that cannot be read or
// parsed an error naming it; either way the Settings returned set nothing,
// and the caller reports the error once.
func Load(queueDir string) (Settings, error) {
	data, err := read(queueDir)
	if errors.Is(err, unix.ENOENT) {
		return Settings{}, nil
	}
	if err != nil {
		return Settings{}, err
	}
	s, err := parse(data)
	if err != nil {
		return Settings{}, fmt.Errorf("directory settings %s/%s: %v; fix the file (format: {\"records\": {\"keep\": 500, \"max_age\": \"30d\"}}) or remove it", queueDir, File, err)
	}
	return s, nil
}

// read returns the file's text when it is trusted.
func read(queueDir string) ([]byte, error) {
	data, st, err := safefs.ReadTrusted(queueDir, File, maxLen, trust)
	var untrusted *UntrustedError
	if err != nil && !errors.As(err, &untrusted) && st.Path != "" {
		return nil, fmt.Errorf("cannot read the directory settings %s: %v; fix its permissions or remove it", st.Path, err)
	}
	return data, err
}

// trust says why st must not count, or nil.
func trust(st safefs.Info, dirOwner uint32) error {
	switch {
	case !st.IsRegular():
		return &UntrustedError{st.Path, fmt.Sprintf("it is %s owned by uid %d (never followed or opened; remove it)", st.Kind(), st.UID)}
	case st.UID != 0 && st.UID != dirOwner:
		return &UntrustedError{st.Path, fmt.Sprintf("it is owned by uid %d (mode %04o), and only root or the queue dir's owner (uid %d) sets what applies to every user", st.UID, st.Perm(), dirOwner)}
	case st.WritableByOthers():
		return &UntrustedError{st.Path, fmt.Sprintf("its mode %04o (owner uid %d) lets others write it", st.Perm(), st.UID)}
	case st.Nlink != 1:
		return &UntrustedError{st.Path, fmt.Sprintf("it has %d links (a file linked in from elsewhere is not the admin's settings)", st.Nlink)}
	}
	return nil
}

// parse decodes and checks the text of a settings file.
func parse(data []byte) (Settings, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Settings
	if err := dec.Decode(&s); err != nil {
		return Settings{}, fmt.Errorf("bad JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Settings{}, errors.New("bad JSON: more than one value in the file")
	}
	if s.Records.Keep < 0 {
		return Settings{}, fmt.Errorf("records.keep is %d: use 0 for no count limit", s.Records.Keep)
	}
	return s, nil
}
