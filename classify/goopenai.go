package classify

import (
	"errors"
	"reflect"
)

// goOpenAIPkg is github.com/sashabaranov/go-openai's import path. classify
// reads that client's errors by their documented shape instead of
// importing it. So an application on another client (the official SDKs, a
// plain net/http) does not build go-openai. Default still knows the errors
// of the client the Quickstart uses.
const goOpenAIPkg = "github.com/sashabaranov/go-openai"

// goOpenAIError reads the status and what the body says from e. e may be
// go-openai's *APIError (Code any, Message, Type, HTTPStatusCode,
// InnerError *InnerError{Code}). It may be *RequestError (HTTPStatusCode,
// Body). ok is false for any other error.
func goOpenAIError(e error) (status int, p problem, ok bool) {
	v := reflect.ValueOf(e)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, problem{}, false
	}
	el := v.Elem()
	if el.Type().PkgPath() != goOpenAIPkg {
		return 0, problem{}, false
	}
	switch el.Type().Name() {
	case "APIError":
		p = problem{typ: stringField(el, "Type"), message: stringField(el, "Message")}
		if c := el.FieldByName("Code"); c.IsValid() && c.Kind() == reflect.Interface && !c.IsNil() {
			p.code, p.status = codeString(c.Interface()), codeStatus(c.Interface())
		}
		if in := el.FieldByName("InnerError"); in.IsValid() && in.Kind() == reflect.Pointer && !in.IsNil() && in.Elem().Kind() == reflect.Struct {
			p.inner, p.azureFilter = stringField(in.Elem(), "Code"), true
		}
	case "RequestError":
		if b := el.FieldByName("Body"); b.IsValid() && b.Kind() == reflect.Slice && b.Type().Elem().Kind() == reflect.Uint8 {
			p = parseBody(b.Bytes()) // JSON go-openai does not read: arrays, other shapes
		}
	default:
		return 0, problem{}, false
	}
	if s := el.FieldByName("HTTPStatusCode"); s.IsValid() && s.Kind() == reflect.Int {
		status = int(s.Int())
	}
	return status, p, true
}

// stringField is v's string field name, or "".
func stringField(v reflect.Value, name string) string {
	if f := v.FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

// goOpenAISentinels are the texts of go-openai's errors for requests it
// refuses to send (ErrChatCompletionInvalidModel, ErrO1BetaLimitationsTools
// and the like, go-openai v1.43.0). The same request fails the same way
// every time. They are errors.New values, so only their text identifies
// them. Default matches it whole, on an errors.New value only.
var goOpenAISentinels = map[string]bool{
	"this model is not supported with this method, please use CreateCompletion client method instead":                                       true,
	"streaming is not supported with this method, please use CreateChatCompletionStream":                                                    true,
	"can't use both Content and MultiContent properties simultaneously":                                                                     true,
	"this model is not supported with this method, please use CreateChatCompletion client method instead":                                   true,
	"streaming is not supported with this method, please use CreateCompletionStream":                                                        true,
	"the type of CompletionRequest.Prompt only supports string and []string":                                                                true,
	"streaming is not supported with this method, please use CreateResponseStream":                                                          true,
	"this model is not supported with moderation, please use text-moderation-stable or text-moderation-latest instead":                      true,
	"reasoning effort is not supported by this model":                                                                                       true,
	"tool calling with this model and reasoning effort requires the Responses API":                                                          true,
	"temperature, top_p and log probabilities must be omitted when reasoning is enabled":                                                    true,
	"this model is not supported MaxTokens, please use MaxCompletionTokens":                                                                 true,
	"this model has beta-limitations, logprobs not supported":                                                                               true,
	"this model has beta-limitations, temperature, top_p and n are fixed at 1, while presence_penalty and frequency_penalty are fixed at 0": true,
	"this model has beta-limitations, user and assistant messages only, system messages are not supported":                                  true,
	"this model has beta-limitations, tools, function calling, and response format parameters are not supported":                            true,
}

// goOpenAIEmptyStream is go-openai's ErrTooManyEmptyStreamMessages.
const goOpenAIEmptyStream = "stream has sent too many empty messages"

// errorsNewType is the type errors.New returns.
var errorsNewType = reflect.TypeOf(errors.New(""))

// goOpenAISentinel reports whether e itself is one of go-openai's
// sentinels above. That is an errors.New value with one of their texts.
func goOpenAISentinel(e error) bool {
	return reflect.TypeOf(e) == errorsNewType && goOpenAISentinels[e.Error()]
}

// goOpenAIEmptyStreamErr reports whether e itself is go-openai's
// ErrTooManyEmptyStreamMessages.
func goOpenAIEmptyStreamErr(e error) bool {
	return reflect.TypeOf(e) == errorsNewType && e.Error() == goOpenAIEmptyStream
}
