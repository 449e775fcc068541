package classify

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// problem is what a provider's error body says. Providers use a handful of
// shapes, all read here:
//
//	{"error":{"type","code","message","innererror":{"code"}}}           OpenAI, Azure, Groq, DeepSeek
//	{"type":"error","error":{"type","message","details":{"error_code"}}} Anthropic
//	{"error":{"code":429,"status","message","details":[...]}}            Google (google.rpc.Status)
//	[{"error":{...}}]                                                    Gemini's OpenAI-compatible endpoint
//	{"object":"error","type","code","message"}                           Mistral, older vLLM
//	{"error":"message"}                                                  Ollama's native API, LM Studio
//	{"error":"message","error_type"}                                     Hugging Face TGI
//	{"code","error":"message"}                                           xAI
//	{"code","message"}                                                   Alibaba Model Studio (DashScope)
//	{"errors":[{"code","message"}]}                                      Cloudflare's v4 API
//	{"errors":[{"description"}]}                                         Writer
//	{"error":{"message","param":"a sentence"}}                           a gateway: the sentence is read too
//	{"error":{"message","cause":"{provider body}"}}                       a gateway: the provider's body decides
//	{"__type","message"}                                                 AWS JSON (also x-amzn-ErrorType)
//	{"detail":"message"}                                                 FastAPI servers
//	{"detail":[{"type","loc","msg"}]}, also as "message"                 FastAPI validation (Mistral's 422)
//	{"error":{"code","message","metadata":{"raw"}}}                      OpenRouter, the provider's body in raw
//	{"error":{"type","reason"},"status"}                                 OpenSearch, Elasticsearch
type problem struct {
	typ, code string
	// inner is a second, more specific code. It is Azure's
	// innererror.code or Anthropic's error.details.error_code.
	inner string
	// azureFilter: the body carries Azure's innererror. Only the content
	// filter sends it.
	azureFilter bool
	// status is a numeric code that looks like an HTTP status (google.rpc
	// code, OpenRouter, vLLM). It is used where the HTTP status is
	// unknown.
	status int
	// gstatus is google.rpc.Status.status, e.g. "RESOURCE_EXHAUSTED".
	gstatus string
	// reason is google.rpc.ErrorInfo.reason, e.g. "API_KEY_INVALID".
	reason string
	// model is the model google.rpc.ErrorInfo's metadata names, as Cloud
	// Code's MODEL_CAPACITY_EXHAUSTED does.
	model string
	// quotaID is google.rpc.QuotaFailure's first violation's quotaId, such
	// as "GenerateRequestsPerMinutePerProjectPerModel-FreeTier". It gives
	// the period of the quota a 429 ran out of.
	quotaID string
	// delay is google.rpc.RetryInfo.retryDelay. hasDelay: it parsed.
	delay    time.Duration
	hasDelay bool
	// message is read only by the message table (messages.go). It never
	// leaves the package.
	message string
	// param names the field a rejection is about (rejection.go). It is
	// OpenAI's param, FastAPI's loc or google.rpc.BadRequest's field. Like
	// message, it never leaves the package.
	param string
}

// wireError is one error object in any of the shapes above. Every member
// is decoded on its own. So one of an unexpected type (Azure's numeric
// "status", a null "type") does not hide the others.
type wireError struct {
	Type       json.RawMessage `json:"type"`
	Code       json.RawMessage `json:"code"`
	Message    json.RawMessage `json:"message"`
	Status     json.RawMessage `json:"status"`
	InnerError json.RawMessage `json:"innererror"`
	Details    json.RawMessage `json:"details"`
	Error      json.RawMessage `json:"error"`
	Errors     json.RawMessage `json:"errors"`
	ErrorType  json.RawMessage `json:"error_type"`
	AWSType    json.RawMessage `json:"__type"`
	Detail     json.RawMessage `json:"detail"`
	Metadata   json.RawMessage `json:"metadata"`
	// Description is a message under another name (Writer:
	// {"errors":[{"description":"Invalid value for 'tool_choice': ..."}]}).
	Description json.RawMessage `json:"description"`
	// Param names the field. A gateway puts its sentence there, behind a
	// message that says nothing ({"message":"Param Incorrect","param":
	// "max_tokens is too large: ..."}).
	Param json.RawMessage `json:"param"`
	// Cause is a gateway's copy of the provider's body, as a string. It
	// stands behind a message of its own
	// ({"message":"模型服务调用失败","cause":"{...}"}).
	Cause json.RawMessage `json:"cause"`
	// Reason is a message under another name (OpenSearch, Elasticsearch:
	// {"error":{"type":"illegal_argument_exception","reason":"guardrails
	// triggered for user input"},"status":400}).
	Reason json.RawMessage `json:"reason"`
}

// rpcDetail is one entry of google.rpc.Status.details.
type rpcDetail struct {
	Type     json.RawMessage `json:"@type"`
	Reason   json.RawMessage `json:"reason"`
	Metadata struct {
		Model json.RawMessage `json:"model"`
	} `json:"metadata"`
	RetryDelay json.RawMessage `json:"retryDelay"`
	Violations []struct {
		QuotaID json.RawMessage `json:"quotaId"`
	} `json:"violations"`
	FieldViolations []struct {
		Field json.RawMessage `json:"field"`
	} `json:"fieldViolations"`
}

// parseBody reads a provider error body. A body in none of the shapes
// above says nothing.
func parseBody(b []byte) (p problem) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '<' && !json.Valid(b) {
		// A body in plain text is the server's message ("[{'loc': ('body',
		// 'user'), 'msg': 'extra fields not permitted'}]", "server is
		// overloaded"). A page (HTML, XML) is not.
		p.message = string(b)
		return p
	}
	if len(b) > 0 && b[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(b, &list) != nil || len(list) == 0 {
			return p
		}
		b = list[0]
	}
	var top wireError
	if json.Unmarshal(b, &top) != nil {
		return p
	}
	e := &top
	var inner wireError
	if len(top.Error) > 0 && top.Error[0] == '{' {
		_ = json.Unmarshal(top.Error, &inner) // an object always fits wireError
		e = &inner
	} else if len(top.Errors) > 0 && top.Errors[0] == '[' {
		var list []json.RawMessage // Cloudflare: the first error speaks
		if json.Unmarshal(top.Errors, &list) == nil && len(list) > 0 && len(list[0]) > 0 && list[0][0] == '{' {
			_ = json.Unmarshal(list[0], &inner)
			e = &inner
		}
	}
	raw, ok := openRouterRaw(e.Metadata)
	if !ok {
		raw, _ = jsonString(e.Cause)
		ok = strings.HasPrefix(strings.TrimSpace(raw), "{")
	}
	if ok {
		// OpenRouter's "Provider returned error" says nothing. The
		// provider's own body, kept in metadata.raw, says what happened.
		if q := parseBody([]byte(raw)); q.typ != "" || q.code != "" || q.message != "" {
			if q.status == 0 {
				_, q.status = jsonCode(e.Code)
			}
			return q
		}
	}
	p.typ, _ = jsonString(e.Type)
	if p.typ == "" {
		p.typ, _ = jsonString(top.ErrorType) // TGI
	}
	if p.typ == "" {
		p.typ, _ = jsonString(top.AWSType)
		if _, after, found := strings.Cut(p.typ, "#"); found { // "com.amazon.coral.service#UnrecognizedClientException"
			p.typ = after
		}
	}
	p.gstatus, _ = jsonString(e.Status)
	p.message, _ = jsonString(e.Message)
	if p.message == "" {
		p.message = objectMessage(e.Message) // LiteLLM: {"message":{"error":"Violated guardrail policy",...}}
	}
	if s, ok := jsonString(top.Error); ok {
		// Ollama, TGI, xAI: {"error":"model 'x' not found"}. A message
		// beside it that holds a provider's body says more
		// ({"error":"Forbidden","message":"{\"error\":{...}}"}): it is
		// kept, and read as that body (embeddedBody).
		if !strings.HasPrefix(strings.TrimSpace(p.message), "{") {
			p.message = s
		}
	} else if s, ok := jsonString(top.Detail); ok && p.message == "" {
		p.message = s
	} else if p.message == "" {
		p.message = objectMessage(top.Detail) // LiteLLM: {"detail":{"error":"Violated content safety policy"}}
	}
	if p.message == "" {
		p.message, _ = jsonString(e.Description)
	}
	if p.message == "" {
		p.message, _ = jsonString(e.Reason)
	}
	if p.message == "" {
		p.message, _ = jsonString(e.Details) // UiPath: {"result":"ENTITLEMENTS_MISSING","details":"..."}
	}
	if param, _ := jsonString(e.Param); strings.Contains(param, " ") {
		p.message += " " + param
	} else {
		p.param = param
	}
	if p.message == "" {
		// FastAPI's validation errors are a list under "detail". It stands
		// at the top or as the message itself.
		detail := top.Detail
		if len(e.Message) > 0 && e.Message[0] == '{' {
			var m struct {
				Detail json.RawMessage `json:"detail"`
			}
			_ = json.Unmarshal(e.Message, &m)
			detail = m.Detail
		}
		p.message, p.inner, p.param = validationDetail(detail)
	}
	p.code, p.status = jsonCode(e.Code)
	if len(e.InnerError) > 0 && e.InnerError[0] == '{' {
		var in struct {
			Code json.RawMessage `json:"code"`
		}
		_ = json.Unmarshal(e.InnerError, &in)
		p.inner, _ = jsonString(in.Code)
		p.azureFilter = true
	}
	p.readDetails(e.Details)
	if q, ok := embeddedBody(p.message); ok {
		if q.status == 0 {
			q.status = p.status
		}
		return q
	}
	return p
}

// embeddedBody reads a provider's body that a relay wrote into its own
// message as text: "All accounts exhausted. Last error: HTTP 429: {...}",
// "上游 API 调用失败: ... 400 Bad Request {\"message\":\"Input is too long.\"}".
// The provider's body says what happened; the relay's words only say
// that it passed it on. It is read only when the object parses to a body
// with a message of its own (a JSON schema quoted in a validation error
// has none), and when the relay's words before it say nothing of the
// money, the account or a key, which would be the relay's own verdict.
func embeddedBody(msg string) (problem, bool) {
	i := strings.IndexByte(msg, '{')
	if i < 0 {
		return problem{}, false
	}
	body := strings.TrimSpace(msg[i:])
	if !json.Valid([]byte(body)) {
		return problem{}, false
	}
	if g, _ := vocabMatch([]field{{"message", msg[:i]}}, accountGroups...); g != 0 {
		return problem{}, false
	}
	q := parseBody([]byte(body))
	return q, q.message != ""
}

// readDetails reads google.rpc details (a list) or Anthropic's details
// object.
func (p *problem) readDetails(raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	if raw[0] == '{' {
		var d struct {
			ErrorCode json.RawMessage `json:"error_code"`
		}
		if json.Unmarshal(raw, &d) == nil && p.inner == "" {
			p.inner, _ = jsonString(d.ErrorCode)
		}
		return
	}
	var list []rpcDetail
	if json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, d := range list {
		typ, _ := jsonString(d.Type)
		switch {
		case strings.HasSuffix(typ, "google.rpc.ErrorInfo") && p.reason == "":
			p.reason, _ = jsonString(d.Reason)
			p.model, _ = jsonString(d.Metadata.Model)
		case strings.HasSuffix(typ, "google.rpc.RetryInfo") && !p.hasDelay:
			delay, _ := jsonString(d.RetryDelay)
			p.delay, p.hasDelay = parseProtoDuration(delay)
		case strings.HasSuffix(typ, "google.rpc.QuotaFailure") && p.quotaID == "" && len(d.Violations) > 0:
			p.quotaID, _ = jsonString(d.Violations[0].QuotaID)
		case strings.HasSuffix(typ, "google.rpc.BadRequest") && p.param == "" && len(d.FieldViolations) > 0:
			p.param, _ = jsonString(d.FieldViolations[0].Field)
		}
	}
}

// parseProtoDuration reads a google.protobuf.Duration in its JSON form.
// That is decimal seconds with an "s" suffix ("26s", "1.5s").
func parseProtoDuration(v string) (time.Duration, bool) {
	num, found := strings.CutSuffix(strings.TrimSpace(v), "s")
	if !found {
		return 0, false
	}
	s, ok := parseDecimal(num)
	if !ok {
		return 0, false
	}
	return secondsToHint(s), true
}

// jsonString decodes raw when it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonCode renders an error code that is a string or a number, as
// codeString and codeStatus do for go-openai's Code.
func jsonCode(raw json.RawMessage) (code string, status int) {
	var c any
	if json.Unmarshal(raw, &c) != nil {
		return "", 0
	}
	return codeString(c), codeStatus(c)
}

// openRouterRaw reads OpenRouter's error.metadata.raw, the upstream
// provider's body as text.
func openRouterRaw(meta json.RawMessage) (string, bool) {
	if len(meta) == 0 || meta[0] != '{' {
		return "", false
	}
	var m struct {
		Raw json.RawMessage `json:"raw"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return "", false
	}
	raw, ok := jsonString(m.Raw)
	return raw, ok && raw != ""
}

// validationDetail reads the first entry of FastAPI's validation error
// list, [{"type":"extra_forbidden","loc":["body","x"],"msg":"Extra inputs
// are not permitted"}]. It reads its message and its type (a code). It
// reads its loc too: the field's path, its string parts joined by dots.
func validationDetail(raw json.RawMessage) (msg, typ, loc string) {
	if len(raw) == 0 || raw[0] != '[' {
		return "", "", ""
	}
	var list []struct {
		Type json.RawMessage   `json:"type"`
		Msg  json.RawMessage   `json:"msg"`
		Loc  []json.RawMessage `json:"loc"`
	}
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return "", "", ""
	}
	msg, _ = jsonString(list[0].Msg)
	typ, _ = jsonString(list[0].Type)
	var path []string
	for _, part := range list[0].Loc {
		if s, ok := jsonString(part); ok && s != "body" {
			path = append(path, s)
		}
	}
	return msg, typ, strings.Join(path, ".")
}

// objectMessage reads a message that is itself an object. LiteLLM sends a
// Bedrock guardrail's verdict or an HTTPException's detail so. It reads
// its "error" or "message" string.
func objectMessage(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var m struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	if s, ok := jsonString(m.Error); ok {
		return s
	}
	s, _ := jsonString(m.Message)
	return s
}
