// record_encode.go owns the encoding of the record's event lines, the only
// line a busy lineage writes thousands of times a second. It appends into
// the writer's batch without reflection or allocation and produces exactly
// the bytes encoding/json would (a test holds it to that), so readers and
// tools see one format whichever way a line was written.
package record

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendEventLine appends l as encoding/json would encode it (no newline).
func appendEventLine(b []byte, l *eventLine) ([]byte, error) {
	if y := l.Time.Year(); y < 0 || y > 9999 {
		// Outside what RFC 3339 can say: encoding/json's error.
		enc, err := json.Marshal(l)
		return append(b, enc...), err
	}
	b = append(b, `{"type":`...)
	b = appendJSONString(b, l.Type)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(l.Kind))
	b = append(b, `,"time":"`...)
	b = l.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","pid":`...)
	b = strconv.AppendInt(b, int64(l.PID), 10)
	b = append(b, `,"start":`...)
	b = strconv.AppendUint(b, l.Start, 10)
	b = appendIntField(b, `,"ppid":`, l.PPID)
	b = appendIntField(b, `,"pgid":`, l.PGID)
	b = appendIntField(b, `,"sid":`, l.SID)
	b = appendIntPtrField(b, `,"uid":`, l.UID)
	if l.Filename != "" {
		b = append(b, `,"filename":`...)
		b = appendJSONString(b, l.Filename)
	}
	if len(l.Argv) > 0 {
		b = append(b, `,"argv":[`...)
		for i, a := range l.Argv {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a)
		}
		b = append(b, ']')
	}
	b = appendIntPtrField(b, `,"exit_code":`, l.ExitCode)
	b = appendIntPtrField(b, `,"signal":`, l.Signal)
	if l.ArgvTruncated {
		b = append(b, `,"argv_truncated":true`...)
	}
	return append(b, '}'), nil
}

// appendIntField appends an omitempty int field.
func appendIntField(b []byte, key string, v int) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(v), 10)
}

// appendIntPtrField appends an omitempty *int field.
func appendIntPtrField(b []byte, key string, v *int) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(*v), 10)
}

// appendJSONString appends s quoted. Printable ASCII that encoding/json
// leaves alone is copied; anything else (quotes, backslashes, control
// bytes, the HTML characters it escapes, any non-ASCII) is left to
// encoding/json itself, so its escaping rules stay the only ones.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
