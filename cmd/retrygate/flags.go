package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// durationFlag is a duration flag whose error says how to write one: a
// bare number ("--p99 18") gets the same number with a unit to copy.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// parseDuration is time.ParseDuration with errors that show the fix.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		n := strings.TrimSpace(s)
		return 0, fmt.Errorf("a duration needs a unit: %ss (or %sms, %sm)", n, n, n)
	}
	return 0, errors.New("not a duration: write it like 18s, 1.5s, 250ms or 2m")
}

// durationVar registers a duration flag with durationFlag's errors.
func durationVar(fs *flag.FlagSet, d *time.Duration, name string, value time.Duration, usage string) {
	*d = value
	fs.Var(durationFlag{d}, name, usage)
}

// flagError writes a flag package error with the flags spelled as the
// usage spells them (--p99, not -p99).
func flagError(err error) string {
	msg := err.Error()
	for _, old := range []string{"flag provided but not defined: -", "for flag -", "flag needs an argument: -"} {
		msg = strings.Replace(msg, old, old+"-", 1)
	}
	return msg
}

// printFlags lists a flag set's flags in the top-level usage's style:
// "  --name ARG" in a 22-column field, then the usage and a default that
// is not zero.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		left := "  --" + f.Name
		if name != "" {
			left += " " + name
		}
		if len(left) < flagColumn-1 {
			left += strings.Repeat(" ", flagColumn-len(left))
		} else {
			left += "  "
		}
		line := left + usage
		if def := f.DefValue; def != "" && def != "0" && def != "0s" && def != "false" {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					def = strconv.Quote(def)
				}
			}
			line += " (default " + def + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// flagColumn is where usage text starts in flag lists.
const flagColumn = 22

// shortDur is d as a flag would take it, without trailing zero units
// (100h, not 100h0m0s).
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
