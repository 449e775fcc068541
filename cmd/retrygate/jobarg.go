package main

import (
	"strconv"
)

// jobArg reads the one JOB argument of status and reset: as printed (see
// parseJob), or, with --route, as the URL parameter of a job httpmw built
// on that chi route.
func jobArg(args []string, route string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usageErrorf("missing JOB")
	case len(args) > 1:
		return "", usageErrorf("one JOB expected, got %d arguments (quote a job key with spaces)", len(args))
	}
	job, err := parseName("JOB", args[0])
	if err != nil {
		return "", err
	}
	if route != "" {
		if job, err = routeJob(route, job); err != nil {
			return "", jobError(err)
		}
	}
	return job, nil
}

// parseName reads a name (a JOB, --upstream, --prefix) the way printable
// writes it, so an operator can paste what the CLI printed: an argument in
// double quotes is a Go string literal ("doc\x00" is "doc" and a NUL
// byte); anything else is the name as is. printable quotes every name that
// holds a double quote, so every name can be given, and
// parseName(printable(s)) == s.
func parseName(what, arg string) (string, error) {
	if arg == "" || arg[0] != '"' {
		return arg, nil
	}
	s, err := strconv.Unquote(arg)
	if err != nil {
		return "", usageErrorf("%s starts with a double quote but is not a quoted name as retrygate prints it (\"doc\\x00\"); "+
			"if the name itself starts with a double quote, write it quoted: %s", what, printable(arg))
	}
	return s, nil
}
