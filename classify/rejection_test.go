package classify_test

import (
	"testing"

	"github.com/retrygate/retrygate/classify"
)

// TestNamedRejection: a rejection (400, 422, a mid-stream
// invalid_request_error) that names the part of the request it rejects,
// in words the vocabulary does not list or in the body's field path, is
// proof; one that speaks of the model or its deployment and names no
// field is the model's (systemic, never Failed); one made of the generic
// words of a rejection, or that speaks of the server, the credentials,
// the account or a network policy, stays a suspect (rejection.go). The generic rows are the
// training corpus's own suspects, with their sources there.
func TestNamedRejection(t *testing.T) {
	msg := func(m string) string { return `{"error":{"message":"` + m + `","type":"invalid_request_error"}}` }
	named := classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonInvalidRequest, Evidence: "message:names_request"}
	field := classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonInvalidRequest, Evidence: "param:field"}
	model := classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonModelNotFound, Evidence: "message:model_named"}
	tests := []struct {
		name   string
		status int
		body   string
		exp    classify.Verdict
	}{
		{"400 names a part", 400, msg("Tool name 'get weather' holds a space"), named},
		{"422 names a part", 422, msg("Tool name 'get weather' holds a space"), named},
		{"mid-stream names a part", 0, msg("Tool name 'get weather' holds a space"), named},
		{"param names the field", 400, `{"error":{"message":"Invalid request","param":"messages[1].role"}}`, field},
		{"FastAPI loc names the field", 422, `{"detail":[{"loc":["body","messages",0,"role"],"msg":"Value error","type":"value_error"}]}`, field},
		{"google.rpc BadRequest names the field", 400, `{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"contents[0].parts"}]}]}}`, field},

		// Generic rejections: classify/testdata/corpus (bedrock.json,
		// alibaba-model-studio.json, gemini.json, vercel-ai-gateway.json,
		// openai.json, xinference.json, deepseek.json).
		{"malformed input", 400, `{"message":"Malformed input request, please reformat your input and try again."}`, suspect(classify.ReasonInvalidRequest)},
		{"parameters missing or invalid", 400, `{"code":"InvalidParameter","message":"Required parameter(s) missing or invalid, please check the request parameters.","request_id":"b1f1e1f0-0000-0000-0000-000000000002"}`, suspect(classify.ReasonInvalidRequest)},
		{"body malformed", 400, `{"error":{"code":400,"message":"The request body is malformed.","status":"INVALID_ARGUMENT"}}`, suspect(classify.ReasonInvalidRequest)},
		{"invalid prompt format", 400, msg("Invalid prompt format"), suspect(classify.ReasonInvalidRequest)},
		{"request failed", 400, msg("request failed"), suspect(classify.ReasonInvalidRequest)},
		{"specify the prompt", 400, `{"detail":"Invalid input. Please specify the prompt."}`, suspect(classify.ReasonInvalidRequest)},
		{"invalid parameters", 422, `{"error":{"message":"Invalid Parameters"}}`, suspect(classify.ReasonInvalidRequest)},
		{"a request id is no part", 422, `{"error":{"message":" (request id: 2024040714324820864326815777479)","type":"upstream_error","param":"422","code":"bad_response_status_code"}}`, suspect(classify.ReasonInvalidRequest)},
		{"one word is too little", 400, msg("nope"), suspect(classify.ReasonInvalidRequest)},
		{"digits joined are no name", 400, msg("Invalid request 12_345"), suspect(classify.ReasonInvalidRequest)},
		{"underscores for emphasis are no name", 400, msg("_Invalid_ _request_"), suspect(classify.ReasonInvalidRequest)},
		{"one letter is too little", 400, msg("parameter 'x' is invalid"), suspect(classify.ReasonInvalidRequest)},
		// The generic side is closed over grammar and over the request's
		// other nouns (the twenty-third set's Doubao and MiniMax).
		{"inflections of generic words", 400, msg("The parameters specified were rejected"), suspect(classify.ReasonInvalidRequest)},
		{"valid negated", 400, msg("Parameters are not valid"), suspect(classify.ReasonInvalidRequest)},
		{"inflections by suffix", 400, msg("Failing formats checked"), suspect(classify.ReasonInvalidRequest)},
		{"settings are a request noun", 400, msg("invalid params, invalid chat settings"), suspect(classify.ReasonInvalidRequest)},

		// A param that names the deployment or the account, or no field.
		{"param model", 400, `{"error":{"message":"Invalid request","param":"model"}}`, suspect(classify.ReasonInvalidRequest)},
		{"param a number", 400, `{"error":{"message":"Invalid request","param":"422"}}`, suspect(classify.ReasonInvalidRequest)},
		{"param the account", 400, `{"error":{"message":"Invalid request","param":"billing"}}`, suspect(classify.ReasonInvalidRequest)},
		{"param beside trouble", 400, `{"error":{"message":"Request timed out","param":"messages"}}`, suspect(classify.ReasonInvalidRequest)},

		// Words of trouble, of the account, of another script, or text
		// that did not decode.
		{"later", 400, msg("Tool name 'get weather' could not be checked, try again later"), suspect(classify.ReasonInvalidRequest)},
		{"a field beside time", 400, msg("Timed out while checking max_tokens"), suspect(classify.ReasonInvalidRequest)},

		// The model or its deployment named, with no field of the request:
		// the model's, never Failed. Beside a field's name the model is
		// only where the request goes; inside one it is no word at all.
		{"the deployment", 400, msg("The deployment rejected the tool name 'get weather'"), model},
		{"the model has no endpoint running", 400, msg("The model acme-7b has no dedicated endpoint running"), model},
		{"a field beside the model", 416, msg("max_completion_tokens is limited for this model"), named},
		{"the model as where the request goes", 400, msg("Invalid stop sequences for this model"), named},
		{"the model as where the request goes, no determiner", 400, msg("Seed values are rejected by model acme-7b"), named},
		{"the model as subject stays the model's", 400, msg("This model has no dedicated endpoint for streaming"), model},
		{"where the request goes, first words", 400, msg("For this model, seed values are rejected"), named},
		{"a field's name is no model word", 400, msg("Value of top_k exceeds model_max_top_k"), named},
		{"the model beside a guard word", 400, msg("Unable to access the model acme-7b"), model},
		{"a network policy", 400, msg("Request blocked by IP allowlist policy"), suspect(classify.ReasonInvalidRequest)},
		{"the credentials", 400, msg("The token holds a space"), suspect(classify.ReasonInvalidRequest)},
		{"the account mentioned", 400, msg("Tool name 'get weather' is not in your plan"), suspect(classify.ReasonInvalidRequest)},
		{"another script", 400, msg("模型服务调用失败"), suspect(classify.ReasonInvalidRequest)},
		{"did not decode", 400, msg("Tool%2Aname%zzholds"), suspect(classify.ReasonInvalidRequest)},

		// Only a status that rejects the request: not the server's, a
		// 403, a 404 or a server type under a 400.
		{"500", 500, msg("Tool name 'get weather' holds a space"), transient(classify.ReasonUpstream5xx, false, 0)},
		{"403", 403, msg("Tool name 'get weather' holds a space"), systemic(classify.ReasonAuth, false)},
		{"404", 404, msg("Tool name 'get weather' holds a space"), systemic(classify.ReasonModelNotFound, false)},
		{"400 of a server type", 400, `{"error":{"message":"Tool name 'get weather' holds a space","type":"api_error"}}`, transient(classify.ReasonUpstream5xx, false, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := &classify.HTTPError{StatusCode: tc.status, Body: []byte(tc.body)}
			assertVerdict(t, tc.exp, classify.Default(err), err)
		})
	}
}
