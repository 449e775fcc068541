package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
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

// run is the whole command: testable without a process. With --json,
// errors are JSON too: {"error": ..., "exit_code": ...} on stdout, unless
// the command already printed its JSON result, which then says it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (code int) {
	out := &countingWriter{w: stdout}
	c := &cli{stdout: out, stderr: stderr, getenv: getenv}
	fail := func(code int, msg string) int {
		msg = safeLine(scrub(msg, c.info.secrets...))
		switch {
		case c.json || jsonFlag(args):
			if out.n == 0 {
				_ = writeJSON(stdout, errorJSON{Error: msg, ExitCode: code})
			}
		case msg != "":
			fmt.Fprintln(stderr, "retrygate: "+msg)
		}
		return code
	}
	defer func() {
		// A bug must still end in one line and a non-zero exit, not a trace.
		if r := recover(); r != nil {
			code = fail(exitRuntime, fmt.Sprintf("internal error: %v", r))
		}
	}()
	err := c.main(ctx, args)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: exitRuntime, msg: err.Error()}
	}
	return fail(ee.code, ee.msg)
}

type errorJSON struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// jsonFlag reports whether args ask for --json, for errors found before
// the flags parsed.
func jsonFlag(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-json", "--json", "-json=true", "--json=true", "-json=1", "--json=1":
			return true
		}
	}
	return false
}

// countingWriter counts what a command printed.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}
