package main

import (
	"errors"
	"net/url"
	"strings"
)

// redacted replaces secrets in what an operator typed.
const redacted = "xxxxx"

// redactURL returns raw with its credentials replaced, whether or not it
// parses: everything between "://" and the last '@' (a password may hold
// unescaped '/', '?', '#' or '@' that would fool a parser) becomes
// "user:xxxxx" (the user name is kept when it is clearly one: before the
// first ':'), and the values of query parameters that may hold a secret
// (password, sentinel_password, ...) become xxxxx.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user, _, hasPass := strings.Cut(rest[:at], ":")
		if !hasPass || strings.ContainsAny(user, "/?#") {
			user = redacted
		} else {
			user += ":" + redacted
		}
		rest = user + rest[at:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		params := strings.Split(rest[q+1:], "&")
		for i, p := range params {
			name, _, _ := strings.Cut(p, "=")
			if secretParam(name) {
				params[i] = name + "=" + redacted
			}
		}
		rest = rest[:q+1] + strings.Join(params, "&")
	}
	if scheme == "" && !ok {
		return rest
	}
	return scheme + "://" + rest
}

func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"pass", "secret", "token", "auth", "key"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// urlProblem words why a Redis URL did not parse, in fixed phrases: the
// parsers' own messages quote pieces of the URL, and a password that was
// not percent-encoded ends up in the host, the port, the path or the query.
func urlProblem(err error) string {
	var ee url.EscapeError
	var he url.InvalidHostError
	switch {
	case errors.As(err, &ee):
		return "bad percent-encoding (in a user name or password, write % as %25, @ as %40, : as %3A, / as %2F)"
	case errors.As(err, &he):
		return "bad character in the host"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "invalid port"):
		return "bad port (a password with : / ? # or @ must be percent-encoded)"
	case strings.Contains(msg, "invalid URL scheme"), strings.Contains(msg, "missing protocol scheme"):
		return "the scheme must be redis:// or rediss://"
	case strings.Contains(msg, "database number"), strings.Contains(msg, "URL path"):
		return "bad database number in the path (a password with / ? # or @ must be percent-encoded)"
	case strings.Contains(msg, "unexpected option"), strings.Contains(msg, "invalid") && strings.Contains(msg, "number"),
		strings.Contains(msg, "invalid") && strings.Contains(msg, "duration"), strings.Contains(msg, "invalid") && strings.Contains(msg, "boolean"):
		return "bad or unknown query parameter (see go-redis ParseURL; a password with ? or # must be percent-encoded)"
	case strings.Contains(msg, "control character"):
		return "control character in the URL"
	}
	return "cannot parse it (a password with % : / ? # or @ must be percent-encoded)"
}

// scrub removes the secrets of the connection settings from a message
// that may quote them (an error from a dial, a server, a library): the
// last defense after redactURL and urlProblem.
func scrub(msg string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) < 3 {
			continue // too short to tell from ordinary text; redactURL keeps it out
		}
		msg = strings.ReplaceAll(msg, s, redacted)
		if e := url.QueryEscape(s); e != s {
			msg = strings.ReplaceAll(msg, e, redacted)
		}
		if e := url.PathEscape(s); e != s {
			msg = strings.ReplaceAll(msg, e, redacted)
		}
	}
	return msg
}

// echo is an argument quoted back in an error: a stray URL (a --redis
// value whose flag was forgotten) is shown redacted.
func echo(arg string) string {
	if strings.Contains(arg, "://") || strings.Contains(arg, "@") {
		return redactURL(arg)
	}
	return arg
}
