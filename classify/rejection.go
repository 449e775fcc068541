package classify

import (
	"strings"
	"unicode"
)

// A rejection that names the request is proof.
//
// A server that rejects a request (400, 416, 422, a mid-stream
// invalid_request_error) says one of two things:
//   - which part of the request is wrong: "max_tokens must be at least 16
//     for sonar", "functions is not supported", "`inputs` must have less
//     than 1024 tokens";
//   - nothing more than that it rejected it: "Malformed input request,
//     please reformat your input and try again", "Invalid Parameters",
//     "Request contains an invalid argument.".
//
// Listing the first kind's wording never ends: every API validates in its
// own idioms. The second kind is small and closed. A generic rejection
// can only combine the request's nouns (request, input, parameter...)
// with a state (invalid, malformed, failed...) and a courtesy (please
// check, try again).
//
// So the rule reads the other way round. Some words are not claimed by
// the account, key, money, model, rate and overload vocabularies, and
// speak of no server trouble. They are proof when the message says more
// than the generic words. They are proof too when the body names the
// field (OpenAI's param, FastAPI's loc, google.rpc BadRequest's field). A
// message with only generic words stays a suspect.

// genericWords are the words a rejection that names nothing is made of.
// They are the request's nouns, its states, a status line's words and
// courtesies. A word with a digit (a status, a request id, a hex id) is
// generic too.
var genericWords = wordSet(`
	a an the this that these it its is are was were be been being has have had
	in on of or and to for with from at by as into your you we our there here
	please check try again see more details detail documentation docs
	reformat specify provide provided correct verify review refer
	request requests input inputs body payload data argument arguments
	parameter parameters param params prompt format query message messages
	invalid valid malformed illegal bad wrong incorrect error errors failed failure
	fail fails blocked rejected missing required unprocessable entity unknown
	exception parsing parse validation unexpected occurred problem issue
	response status code backend provider returned api http id info
	not found could cannot can unable be processed process handle handled
	contains contain containing one some value values accepted
	call calls invocation
	setting settings option options config configuration chat conversation
`)

// generic reports whether w is a generic word or an inflection of one:
// "specified" is "specify", "parameters" "parameter", "failing" "fail".
// The closed side is closed over grammar too.
func generic(w string) bool {
	if genericWords[w] {
		return true
	}
	if base, ok := strings.CutSuffix(w, "ied"); ok && genericWords[base+"y"] {
		return true
	}
	for _, suffix := range [...]string{"s", "es", "d", "ed", "ing"} {
		if base, ok := strings.CutSuffix(w, suffix); ok && genericWords[base] {
			return true
		}
	}
	return false
}

// serverWords speak of the server or of time. A rejection that says them
// may pass later. So it proves nothing, whatever else it names. A word
// ending in '*' matches any word it begins.
var serverWords = strings.Fields(`
	internal server servers service unavailable timeout timed temporar*
	later retr* connection network upstream gateway deadline
	loading loaded starting ready unhealthy shutting restarting capacity
`)

// guardWords speak of the credentials, access, a network policy or a
// moderation service. A rejection that says them and names no field of
// the request may fail every request alike. So it proves nothing.
var guardWords = strings.Fields(`
	key keys token auth* unauthori* permit* allowed forbidden denied access
	project projects policy policies firewall allowlist whitelist ip
	moderation guardrail guardrails filter filtered
`)

// modelWords name what serves the request. A rejection may speak of it
// and name no field of the request: "Unable to access non-serverless
// model ... create and start a new dedicated endpoint for the model".
// That is the model's availability. It fails the same request until
// someone changes the deployment. It is never the job's fault, so never
// Failed, not even on its second sight as a suspect would be. Beside a
// field's name ("max_completion_tokens is limited for this model"), the
// model is only where the request is sent.
var modelWords = wordSet(`model models deployment deployments endpoint endpoints engine`)

// anyOf reports whether w matches one of list.
func anyOf(list []string, w string) bool {
	for _, t := range list {
		if wordMatch(t, w) {
			return true
		}
	}
	return false
}

// rejection is what a rejection's own words say, once no vocabulary group
// decided.
type rejection uint8

const (
	rejectionGeneric rejection = iota // names nothing, or speaks of trouble: a suspect
	rejectionNamed                    // names the part of the request it rejects: proof
	rejectionModel                    // speaks of the model or its deployment: the model's
)

// readRejection reads a rejection (rejection.go's rule), with its
// Evidence. It is asked only once no vocabulary group matched. So
// account, key, money and model words have had their say.
func readRejection(p problem) (rejection, string) {
	if strings.ContainsRune(p.message, '%') && !strings.ContainsRune(p.message, ' ') {
		return rejectionGeneric, "" // text that did not decode (plaintext.go) proves nothing
	}
	text, fields := identifiers(p.message)
	msg := words(text)
	for _, w := range msg {
		if anyOf(serverWords, w) {
			return rejectionGeneric, ""
		}
	}
	if fields > 0 {
		return rejectionNamed, "message:names_request"
	}
	if strings.IndexFunc(p.param, unicode.IsLetter) >= 0 { // a field's name, not a number
		ok := true
		for _, w := range words(p.param) {
			if anyOf(serverWords, w) || anyOf(guardWords, w) || modelWords[w] {
				ok = false
			}
		}
		if g, _ := vocabMatch([]field{{"param", p.param}}, paramAccountGroups...); g != 0 {
			ok = false
		}
		if ok {
			return rejectionNamed, "param:field"
		}
	}
	for i, w := range msg {
		if modelWords[w] && !destination(msg, i) && !(i+1 < len(msg) && roleOfTurn[msg[i+1]]) {
			return rejectionModel, "message:model_named"
		}
	}
	for _, w := range msg {
		if anyOf(guardWords, w) {
			return rejectionGeneric, ""
		}
	}
	if len(msg) < 2 {
		return rejectionGeneric, "" // one word is a status's name or a placeholder ("nope")
	}
	for _, w := range msg {
		// One letter ("parameter 'x' is invalid") is too little to name
		// a part of the request on its own. The body's param may.
		if len(w) > 1 && !generic(w) && isASCIIWord(w) && !hasDigit(w) {
			return rejectionNamed, "message:names_request"
		}
	}
	return rejectionGeneric, ""
}

// destination reports whether the model word msg[i] only says where the
// request goes: "invalid stop sequences for this model", "not allowed
// with the model". The sentence is about something the request holds.
// A model that is the sentence's subject or object ("Unable to access
// non-serverless model", "The model acme-7b has no endpoint") stays the
// model's.
func destination(msg []string, i int) bool {
	j := i - 1
	if j >= 0 && determiners[msg[j]] {
		j--
	}
	return j >= 0 && prepositions[msg[j]]
}

var (
	// roleOfTurn: "model turn" is a turn of the conversation, not the model.
	roleOfTurn   = wordSet(strings.ReplaceAll(modelAsRole, "|", " "))
	determiners  = wordSet(`this the that your selected current requested chosen`)
	prepositions = wordSet(`for with by on in to`)
)

// identifiers takes the snake_case names out of s ("max_model_len",
// "FD_MAX_STOP_SEQS_NUM", "tool_choice"). Each names a field of the
// request. Its parts are not words: "model" in "max_model_len" speaks of
// no model. It returns s without them and how many there were.
func identifiers(s string) (string, int) {
	var b strings.Builder
	n := 0
	isPart := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isPart(rune(s[j])) && s[j] < utf8RuneSelf {
			j++
		}
		if j == i {
			b.WriteByte(s[i])
			i++
			continue
		}
		tok := strings.Trim(s[i:j], "_")
		if strings.Contains(tok, "_") && strings.IndexFunc(tok, unicode.IsLetter) >= 0 {
			n++
			b.WriteByte(' ')
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String(), n
}

// paramAccountGroups: a param that names the account ("billing") names no
// part of the request.
var paramAccountGroups = append(append([]group{}, accountGroups...), gMention)

// utf8RuneSelf: identifiers are read in ASCII. Other bytes pass through.
const utf8RuneSelf = 0x80

// isASCIIWord: a word of another script is not read as naming anything.
// Chinese has no word boundaries, so a whole sentence is one word.
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
