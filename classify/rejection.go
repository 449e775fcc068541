package classify

import (
	"strings"
	"unicode"
)

// A rejection that names the request is proof.
//
// A server that rejects a request (400, 416, 422, a mid-stream
// invalid_request_error) says either which part of the request is wrong
// ("max_tokens must be at least 16 for sonar", "functions is not
// supported", "`inputs` must have less than 1024 tokens") or nothing more
// than that it rejected it ("Malformed input request, please reformat
// your input and try again", "Invalid Parameters", "Request contains an
// invalid argument."). Listing the first kind's wording never ends: every
// API validates in its own idioms. The second kind is small and closed: a
// generic rejection can only combine the request's nouns (request, input,
// parameter...) with a state (invalid, malformed, failed...) and a
// courtesy (please check, try again). So the rule reads the other way
// round: what the account, key, money, model, rate and overload
// vocabularies do not claim, and what speaks of no server trouble, is
// proof when the message says more than the generic words, or when the
// body names the field (OpenAI's param, FastAPI's loc, google.rpc
// BadRequest's field). A message with only generic words stays a suspect.

// genericWords are the words a rejection that names nothing is made of:
// the request's nouns, its states, a status line's words and courtesies.
// A word with a digit (a status, a request id, a hex id) is generic too.
var genericWords = wordSet(`
	a an the this that these it its is are was were be been being has have had
	in on of or and to for with from at by as into your you we our there here
	please check try again see more details detail documentation docs
	reformat specify provide provided correct verify review refer
	request requests input inputs body payload data argument arguments
	parameter parameters param params prompt format query message messages
	invalid malformed illegal bad wrong incorrect error errors failed failure
	fail fails blocked rejected missing required unprocessable entity unknown
	exception parsing parse validation unexpected occurred problem issue
	response status code backend provider returned api http id info
	not found could cannot can unable be processed process handle handled
	contains contain containing one some value values accepted
	call calls invocation
`)

// troubleWords speak of the server, a deployment, the credentials, a
// network policy or time: a rejection that says them may pass later or
// elsewhere, or fail every request alike, so it proves nothing. A word
// ending in '*' matches any word it begins.
var troubleWords = strings.Fields(`
	internal server servers service unavailable timeout timed temporar*
	later retr* connection network upstream gateway deadline
	loading loaded starting ready unhealthy shutting restarting capacity
	model models deployment deployments endpoint endpoints engine
	key keys token auth* unauthori* permit* allowed forbidden denied access
	project projects policy policies firewall allowlist whitelist ip
	moderation guardrail guardrails filter filtered
`)

// trouble reports whether w is one of troubleWords.
func trouble(w string) bool {
	for _, t := range troubleWords {
		if wordMatch(t, w) {
			return true
		}
	}
	return false
}

// namedRejection reports whether a rejection names the part of the request
// it rejects, with its Evidence. It is asked only once no vocabulary group
// matched, so account, key, money and model words have had their say.
func namedRejection(p problem) (string, bool) {
	if strings.ContainsRune(p.message, '%') && !strings.ContainsRune(p.message, ' ') {
		return "", false // text that did not decode (plaintext.go) proves nothing
	}
	msg := words(p.message)
	for _, w := range msg {
		if trouble(w) {
			return "", false
		}
	}
	if strings.IndexFunc(p.param, unicode.IsLetter) >= 0 { // a field's name, not a number
		ok := true
		for _, w := range words(p.param) {
			if trouble(w) {
				ok = false
			}
		}
		if g, _ := vocabMatch([]field{{"param", p.param}}, paramAccountGroups...); g != 0 {
			ok = false
		}
		if ok {
			return "param:field", true
		}
	}
	if len(msg) < 2 {
		return "", false // one word is a status's name or a placeholder ("nope")
	}
	for _, w := range msg {
		// One letter ("parameter 'x' is invalid") is too little to name
		// a part of the request on its own; the body's param may.
		if len(w) > 1 && !genericWords[w] && isASCIIWord(w) && !hasDigit(w) {
			return "message:names_request", true
		}
	}
	return "", false
}

// paramAccountGroups: a param that names the account ("billing") names no
// part of the request.
var paramAccountGroups = append(append([]group{}, accountGroups...), gMention)

// isASCIIWord: a word of another script (Chinese has no word boundaries,
// so a whole sentence is one word) is not read as naming anything.
func isASCIIWord(w string) bool {
	for _, r := range w {
		if r > unicode.MaxASCII {
			return false
		}
	}
	return true
}

func hasDigit(w string) bool {
	return strings.IndexFunc(w, unicode.IsDigit) >= 0
}

func wordSet(s string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}
