package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

// Exit codes, documented in doc.go and the usage text.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
	exitNotMet  = 3
	exitRunning = 4
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// exitError ends a command with a code and a one-line message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// run is the whole command: testable without a process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (code int) {
	defer func() {
		// A bug must still end in one line and a non-zero exit, not a trace.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "retrygate: internal error: %v\n", r)
			code = exitRuntime
		}
	}()
	c := &cli{stdout: stdout, stderr: stderr, getenv: getenv}
	err := c.main(ctx, args)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: exitRuntime, msg: err.Error()}
	}
	if ee.msg != "" {
		fmt.Fprintln(stderr, "retrygate: "+oneLine(ee.msg))
	}
	return ee.code
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
