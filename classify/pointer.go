package classify

import "strings"

// A validator says where in the request it found the fault with a JSON
// pointer (RFC 6901): "Reason: got array, want string, Location:
// /properties/messages/items/properties/content/oneOf/0/type",
// "#/texts/0: expected maxLength: 2048". The pointer is an address, as a
// link is, and its words are the schema's: "Location" there is no
// geography, so the vocabulary does not read it as the account's
// whereabouts.

// pointerAt returns the length of the JSON pointer that starts at s[i],
// or 0. A pointer starts a token ("/" or "#/" after a space, a quote, a
// bracket, a colon or the start), its first segment starts with a letter
// or a digit, and it has at least two segments: "/v1" alone or "and/or"
// is no pointer. It ends at a space, a quote, a comma, a closing bracket
// or a final full stop.
func pointerAt(s string, i int) int {
	if i > 0 && !strings.ContainsRune(" \t\n'\"`([{:=", rune(s[i-1])) {
		return 0
	}
	j := i
	if strings.HasPrefix(s[j:], "#/") {
		j++
	}
	if s[j] != '/' || j+1 >= len(s) || !isAlnum(s[j+1]) {
		return 0
	}
	end := j
	for end < len(s) && !strings.ContainsRune(" \t\n'\"`,)]}", rune(s[end])) {
		end++
	}
	tok := strings.TrimRight(s[j:end], ".")
	if strings.Count(tok, "/") < 2 {
		return 0
	}
	return j - i + len(tok)
}

// isLabel reports whether word, followed by between (the text from its
// end to a pointer), is the pointer's label: "Location: ", "path: ". Only
// the words validators label a pointer with are labels: any word before
// a colon would take an account's own ("billing: /0/1", "no models
// loaded: /0/1") out of what the vocabulary reads.
func isLabel(word, between string) bool {
	return labelWords[word] && strings.TrimSpace(between) == ":"
}

// labelWords are the words validators label a JSON pointer with
// (lowercased, as words gives them): "Location" (vocab_test.go's
// validation error), ajv's "instancePath" (its last word).
var labelWords = map[string]bool{"location": true, "path": true}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
