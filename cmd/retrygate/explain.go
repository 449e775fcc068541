package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/retrygate/retrygate/classify"
)

// explainStdin is where explain reads a response when no FILE is given
// (a variable so tests can feed it).
var explainStdin io.Reader = os.Stdin

// maxExplainInput bounds what explain reads: an error response is a few
// kilobytes, and classify reads at most 1 MiB of a body.
const maxExplainInput = 1<<20 + 64<<10

func explainCommand() *command {
	var status int
	return &command{
		name: "explain", args: "[FILE]",
		summary: "say what the gate would do with a failed response (raw HTTP, or a Go client's error text, " +
			"including Go's HTTP client's for no response: a timeout, a refused connection, a DNS failure; FILE or stdin)",
		flags: func(fs *flagSet) {
			fs.IntVar(&status, "status", 0, "the response's `STATUS` when the input has none (a bare body, or headers without a status line)")
		},
		run: func(ctx context.Context, c *cli, args []string) error {
			return runExplain(c, args, status)
		},
	}
}

// explainJSON is explain's --json output; its fields are stable.
type explainJSON struct {
	Status int `json:"status"`
	// NoResponse names the failure of a call that got no response (status
	// 0): what Go's HTTP client logged, e.g. "connection refused".
	NoResponse      string `json:"no_response,omitempty"`
	Class           string `json:"class"`
	Reason          string `json:"reason"`
	ProviderWide    bool   `json:"provider_wide"`
	Suspect         bool   `json:"suspect"`
	RetryAfterMS    int64  `json:"retry_after_ms"`
	Evidence        string `json:"evidence"`
	WhatTheGateDoes string `json:"what_the_gate_does"`
}

func runExplain(c *cli, args []string, status int) error {
	if len(args) > 1 {
		return usageErrorf("unexpected argument %q", echo(args[1]))
	}
	if status != 0 && !validStatus(status) {
		return usageErrorf("--status %d is not an HTTP status (100-599)", status)
	}
	in, name := explainStdin, "stdin"
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return usageErrorf("%v", err)
		}
		defer f.Close()
		in, name = f, printable(args[0])
	}
	raw, err := io.ReadAll(io.LimitReader(in, maxExplainInput))
	if err != nil {
		return usageErrorf("reading %s: %v", name, err)
	}
	if status == 0 {
		if terr, cause := transportError(string(raw)); terr != nil {
			return explainTransport(c, terr, cause)
		}
	}
	resp, err := parseResponse(raw, status)
	if err != nil {
		return usageErrorf("%s: %v", name, err)
	}
	if resp.status < 400 {
		return explainSuccess(c, resp.status)
	}
	v := classify.Default(&classify.HTTPError{StatusCode: resp.status, Header: resp.header, Body: resp.body})
	does := gateDoes(v)
	if c.json {
		return writeJSON(c.stdout, explainJSON{Status: resp.status, Class: v.Class.String(), Reason: v.Reason,
			ProviderWide: v.ProviderWide, Suspect: v.Suspect, RetryAfterMS: ms(v.RetryAfter), Evidence: v.Evidence, WhatTheGateDoes: does})
	}
	tw := table(c.stdout)
	row(tw, "status", resp.status)
	row(tw, "verdict", v.Class)
	row(tw, "reason", printable(v.Reason))
	row(tw, "provider-wide", yesNo(v.ProviderWide))
	row(tw, "suspect", yesNo(v.Suspect))
	hint := "none"
	if v.RetryAfter > 0 {
		hint = fmtDur(v.RetryAfter)
	}
	row(tw, "retry hint", hint)
	row(tw, "decided by", printable(v.Evidence))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, does)
	return err
}

// notAFailure is what the gate does with a response below 400: the client
// returns no error, so the call succeeded.
const notAFailure = "Not a failure: the client returns no error for it and the gate records a success."

// explainSuccess answers for a status below 400.
func explainSuccess(c *cli, status int) error {
	if c.json {
		return writeJSON(c.stdout, explainJSON{Status: status, Class: "none", WhatTheGateDoes: notAFailure})
	}
	tw := table(c.stdout)
	row(tw, "status", status)
	row(tw, "verdict", "none")
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(c.stdout, notAFailure)
	return err
}

// explainTransport answers for a call that got no response: what Go's
// HTTP client logged names the cause (transportError).
func explainTransport(c *cli, err error, cause string) error {
	v := classify.Default(err)
	does := gateDoes(v)
	if c.json {
		return writeJSON(c.stdout, explainJSON{Class: v.Class.String(), Reason: v.Reason, NoResponse: cause,
			ProviderWide: v.ProviderWide, Suspect: v.Suspect, RetryAfterMS: ms(v.RetryAfter), Evidence: v.Evidence, WhatTheGateDoes: does})
	}
	tw := table(c.stdout)
	row(tw, "status", "none: no response ("+cause+")")
	row(tw, "verdict", v.Class)
	row(tw, "reason", printable(v.Reason))
	row(tw, "provider-wide", yesNo(v.ProviderWide))
	row(tw, "decided by", printable(v.Evidence))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, does)
	return err
}

// validStatus reports whether code can be an HTTP response's status.
func validStatus(code int) bool {
	return code >= 100 && code <= 599
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// gateDoes says in one sentence what the gate does with v, as the state
// diagram in the package doc (gate/doc.go) has it. Only a provider-wide
// verdict speaks of the upstream: the others touch the job alone.
func gateDoes(v classify.Verdict) string {
	switch {
	case v.Class == classify.ClassPermanent && v.Suspect:
		return "The job cools with its attempt counted; the same rejection on its next attempt marks it Failed."
	case v.Class == classify.ClassPermanent:
		return "The job is marked Failed: retrying will not help."
	case v.Class == classify.ClassSystemic && v.ProviderWide:
		return "Not the job's fault: the job waits without an attempt counted while the upstream pauses until an operator acts or the pause ends."
	case v.Class == classify.ClassSystemic:
		return "Not the job's fault: the job cools without an attempt counted."
	case v.Class == classify.ClassTransient && v.ProviderWide:
		return "The upstream cools for the provider's hint (else its cooldown) and the job waits with it, no attempt counted."
	case v.Class == classify.ClassTransient:
		return "The job cools down with its attempt counted and may run again after the cooldown."
	case v.Class == classify.ClassCanceled:
		return "The job is released with no cooldown."
	}
	return "Undefined verdict."
}

// response is what explain read.
type response struct {
	status int
	header http.Header
	body   []byte
}

// parseResponse reads a response as copied from a log, in one of these
// forms:
//
//   - raw HTTP: an optional status line ("HTTP/1.1 429 Too Many
//     Requests", "HTTP/2 429"), optional headers, a blank line, the body;
//     CRLF or LF. Without a status line, status (from --status) is the
//     status, and the input is headers then a body when its first line
//     looks like a header, else a bare body;
//   - go-openai's error text: "error, status code: 429, status: 429 Too
//     Many Requests, message: ..." (an *APIError: the message is all of
//     the body it keeps) or "..., message: ..., body: {...}" (a
//     *RequestError);
//   - the official SDKs' error text: `POST "https://...": 429 Too Many
//     Requests {...}` (openai-go: the body's error object) or `POST
//     "https://...": 529 (Request-ID: req_...) {...}` (anthropic-sdk-go:
//     the whole body).
//
// The client forms may come after a prefix the application added ("call
// failed: error, status code: ...").
func parseResponse(raw []byte, status int) (response, error) {
	raw = bytes.TrimLeft(raw, " \t\r\n\ufeff")
	if len(raw) == 0 {
		return response{}, fmt.Errorf("empty input: want a status line, headers and a body, a Go client's error text, or a body with --status")
	}
	r := response{status: status}
	br := bufio.NewReader(bytes.NewReader(raw))
	first, _ := br.ReadString('\n')
	line := strings.TrimRight(first, "\r\n")
	hasHeaders := false
	switch {
	case strings.HasPrefix(line, "HTTP/"):
		code, err := statusLine(line)
		if err != nil {
			return response{}, err
		}
		if err := agree(status, code); err != nil {
			return response{}, err
		}
		r.status, hasHeaders = code, true
	case looksLikeHeader(line):
		hasHeaders = true
		br = bufio.NewReader(bytes.NewReader(raw))
	default:
		if cr, ok, err := clientError(string(raw)); ok || err != nil {
			if err != nil {
				return response{}, err
			}
			if err := agree(status, cr.status); err != nil {
				return response{}, err
			}
			return cr, nil
		}
		br = bufio.NewReader(bytes.NewReader(raw))
	}
	if hasHeaders {
		h, err := textproto.NewReader(br).ReadMIMEHeader()
		if err != nil && err != io.EOF {
			return response{}, fmt.Errorf("headers: %v", err)
		}
		r.header = http.Header(h)
	}
	body, _ := io.ReadAll(br)
	r.body = bytes.TrimSpace(body)
	if r.status == 0 {
		return response{}, fmt.Errorf("no status line: give the response's status with --status")
	}
	if !validStatus(r.status) {
		return response{}, fmt.Errorf("status %d is not an HTTP status (100-599)", r.status)
	}
	return r, nil
}

// agree checks that --status, when given, is the status the input states.
func agree(flag, stated int) error {
	if flag != 0 && flag != stated {
		return fmt.Errorf("--status %d disagrees with the input's %d", flag, stated)
	}
	return nil
}

// goOpenAIPrefix starts go-openai's *APIError and *RequestError text.
const goOpenAIPrefix = "error, status code: "

// sdkError matches the start of openai-go's and anthropic-sdk-go's
// *Error text: the method, the quoted URL, the status.
var sdkError = regexp.MustCompile(`\b(?:GET|POST|PUT|PATCH|DELETE) "[^"]*": (-?\d+)(?:\s|$)`)

// clientError reads a Go client's error text (see parseResponse). ok is
// false when s is in none of those forms; err reports a form whose status
// is impossible.
func clientError(s string) (r response, ok bool, err error) {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, goOpenAIPrefix); i >= 0 {
		return goOpenAIText(s[i+len(goOpenAIPrefix):])
	}
	m := sdkError.FindStringSubmatchIndex(s)
	if m == nil {
		return response{}, false, nil
	}
	code, err := strconv.Atoi(s[m[2]:m[3]])
	if err != nil || !validStatus(code) {
		return response{}, true, fmt.Errorf("the error text's status %s is not an HTTP status (100-599)", printable(s[m[2]:m[3]]))
	}
	r.status = code
	rest := s[m[1]:]
	if j := strings.IndexAny(rest, "{["); j >= 0 {
		r.body = []byte(strings.TrimSpace(rest[j:]))
	}
	return r, true, nil
}

// goOpenAIText reads what follows "error, status code: ": "429, status:
// 429 Too Many Requests, message: MSG" or "..., message: ERR, body: BODY".
func goOpenAIText(s string) (r response, ok bool, err error) {
	num, rest, found := strings.Cut(s, ",")
	code, convErr := strconv.Atoi(strings.TrimSpace(num))
	if !found || convErr != nil || !validStatus(code) {
		return response{}, true, fmt.Errorf("go-openai's error text has no HTTP status (100-599) after %q", goOpenAIPrefix)
	}
	r.status = code
	_, msg, found := strings.Cut(rest, ", message: ")
	if !found {
		return r, true, nil
	}
	if _, body, isRequestErr := strings.Cut(msg, ", body: "); isRequestErr {
		r.body = []byte(strings.TrimSpace(body)) // a *RequestError: the body as sent
		return r, true, nil
	}
	// An *APIError keeps only the message: give it its envelope.
	r.body, err = json.Marshal(map[string]map[string]string{"error": {"message": strings.TrimSpace(msg)}})
	return r, true, err
}

// statusLine reads "HTTP/1.1 429 Too Many Requests" or "HTTP/2 429".
func statusLine(line string) (int, error) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[1]) != 3 {
		return 0, errStatusLine
	}
	code, err := strconv.Atoi(f[1])
	if err != nil || code < 100 {
		return 0, errStatusLine
	}
	return code, nil
}

// looksLikeHeader reports whether line is "Name: value" with a token name.
func looksLikeHeader(line string) bool {
	name, _, ok := strings.Cut(line, ":")
	if !ok || name == "" {
		return false
	}
	for _, c := range name {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// errStatusLine does not quote the line back: input is upstream text.
var errStatusLine = errors.New(`the first line starts with "HTTP/" but is not a status line such as "HTTP/1.1 429 Too Many Requests"`)
