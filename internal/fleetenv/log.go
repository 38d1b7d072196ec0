// log.go owns logging set-up: zerolog with human console output on a
// terminal and JSON lines otherwise; --log-format overrides.
package fleetenv

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

// NewLogger returns a logger writing to w in format auto, console or json.
func NewLogger(w io.Writer, format string) (zerolog.Logger, error) {
	switch format {
	case "", "auto":
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			format = "console"
		} else {
			format = "json"
		}
	case "console", "json":
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q is not one of auto, console, json", format)
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	// Durations as whole milliseconds under keys ending in _ms (see
	// TestDurationKeysHaveUnits): zerolog's default float milliseconds
	// under a bare key read as seconds to a person.
	zerolog.DurationFieldUnit = time.Millisecond
	zerolog.DurationFieldInteger = true
	level := zerolog.InfoLevel
	if os.Getenv("GPU_HOLD_DEBUG") != "" {
		level = zerolog.DebugLevel
	}
	if format == "console" {
		f, ok := w.(*os.File)
		cw := zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !ok || !isatty.IsTerminal(f.Fd()),
			// Field values with control characters are quoted by the
			// writer; a message is printed as it is, and may carry
			// another user's text (a label, a ticket).
			FormatPrepare: func(evt map[string]any) error {
				if m, ok := evt[zerolog.MessageFieldName].(string); ok {
					evt[zerolog.MessageFieldName] = termsafe.Lines(m)
				}
				return nil
			}}
		return zerolog.New(cw).Level(level).With().Timestamp().Logger(), nil
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("prog", "gpu-hold").Logger(), nil
}
