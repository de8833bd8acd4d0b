package cliutil

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Size is a flag value holding a number of bytes. It accepts a plain number
// of bytes or a number with a unit: KiB, MiB, GiB (powers of 1024) or KB,
// MB, GB (powers of 1000), upper or lower case, with an optional space and
// an optional B ("64MiB", "64 MiB", "64m" is rejected as ambiguous).
type Size struct{ n int64 }

// NewSize returns a Size holding n bytes, to use as a flag's default.
func NewSize(n int64) *Size { return &Size{n} }

// Bytes returns the size in bytes.
func (s *Size) Bytes() int64 { return s.n }

// Set parses v.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	s.n = n
	return nil
}

// String prints the size in the largest binary unit that divides it.
func (s *Size) String() string {
	if s == nil {
		return "0"
	}
	return formatSize(s.n)
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"b", 1},
}

// ParseSize parses "67108864", "64MiB", "64 MiB" or "64MB".
func ParseSize(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || (mult > 1 && n > (1<<62)/mult) {
		return 0, fmt.Errorf("want a size in bytes, such as 1048576, 64MiB or 64MB")
	}
	return n * mult, nil
}

// formatSize prints n in the largest binary unit that divides it exactly:
// 67108864 is "64MiB", 1000 is "1000".
func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// SizeFlagValue returns the bytes of the Size flag name in c.
func SizeFlagValue(c *cli.Context, name string) int64 {
	if s, ok := c.Generic(name).(*Size); ok {
		return s.Bytes()
	}
	return 0
}

// Duration is a flag value holding a time.Duration whose parse error says
// the expected form. (*cli.Context).Duration reads it.
type Duration struct{ d time.Duration }

// NewDuration returns a Duration holding d, to use as a flag's default.
func NewDuration(d time.Duration) *Duration { return &Duration{d} }

// Set parses v as a Go duration.
func (d *Duration) Set(v string) error {
	p, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("want a duration with a unit, such as 250ms, 5s, 1m30s or 2h")
	}
	d.d = p
	return nil
}

// String prints the duration as time.Duration does.
func (d *Duration) String() string {
	if d == nil {
		return "0s"
	}
	return d.d.String()
}

// ByteCount prints n in bytes and, from 1 KiB, in the largest binary unit
// as well, to one decimal: "512 B", "1536 B (1.5 KiB)".
func ByteCount(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, units := float64(n), "KMGTPE"
	i := -1
	for (f >= unit || f <= -unit) && i < len(units)-1 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%d B (%.1f %ciB)", n, f, units[i])
}
