package llmfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// writeHeaders sets the dialect's rate-limit headers, sent on every answer.
func (p *Provider) writeHeaders(h http.Header, a answer) {
	switch p.dialect {
	case NoHeaders:
		return
	case Anthropic:
		anthropicHeaders(h, a)
		return
	}
	openAIHeaders(h, a)
}

// openAIHeaders: x-ratelimit-{limit,remaining,reset}-{requests,tokens}, the
// reset as "the time until the rate limit … resets to its initial state" in
// OpenAI's form ("1s", "6m0s", "85ms")
// (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).
func openAIHeaders(h http.Header, a answer) {
	for _, l := range [...]struct {
		name string
		b    bucket
	}{{"requests", a.requests}, {"tokens", a.tokens}} {
		if l.b.limit == 0 {
			continue
		}
		h.Set("X-Ratelimit-Limit-"+l.name, strconv.FormatInt(l.b.limit, 10))
		h.Set("X-Ratelimit-Remaining-"+l.name, strconv.FormatInt(l.b.remaining(a.now), 10))
		h.Set("X-Ratelimit-Reset-"+l.name, openAIDuration(l.b.fullIn(a.now)))
	}
}

// openAIDuration writes d as OpenAI does, a Go duration in whole
// milliseconds ("6ms", "3.89s", "6m0s"), rounded up so it is never early.
func openAIDuration(d time.Duration) string {
	return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
}

// anthropicHeaders: anthropic-ratelimit-{requests,input-tokens,output-tokens,
// tokens}-{limit,remaining,reset}, the reset an RFC 3339 instant when the
// limit is "fully replenished"; tokens-* is the most restrictive of the
// token limits (https://docs.anthropic.com/en/api/rate-limits#response-headers).
// Resets are rounded up to the second, as Anthropic sends them. Tokens
// remaining are "rounded to the nearest thousand" (the same page, and its
// German edition, https://docs.anthropic.com/de/api/rate-limits: "auf das
// nächste Tausend gerundet"): a count may say up to 500 more than is left.
func anthropicHeaders(h http.Header, a answer) {
	set := func(name string, b bucket) {
		left := b.remaining(a.now)
		if name != "Requests" {
			left = (left + 500) / 1000 * 1000
		}
		h.Set("Anthropic-Ratelimit-"+name+"-Limit", strconv.FormatInt(b.limit, 10))
		h.Set("Anthropic-Ratelimit-"+name+"-Remaining", strconv.FormatInt(left, 10))
		h.Set("Anthropic-Ratelimit-"+name+"-Reset", ceilSecond(a.now.Add(b.fullIn(a.now))).Format(time.RFC3339))
	}
	var tightest *bucket
	for _, l := range [...]struct {
		name string
		b    *bucket
	}{{"Requests", &a.requests}, {"Input-Tokens", &a.tokens}, {"Output-Tokens", &a.output}} {
		if l.b.limit == 0 {
			continue
		}
		set(l.name, *l.b)
		if l.name != "Requests" && (tightest == nil || l.b.remaining(a.now) < tightest.remaining(a.now)) {
			tightest = l.b
		}
	}
	if tightest != nil {
		set("Tokens", *tightest)
	}
}

func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}

// writeRefusal writes the dialect's 429.
func (p *Provider) writeRefusal(w http.ResponseWriter, a answer) {
	if p.dialect == NoHeaders {
		// Vertex AI's 429 as its OpenAI-compatible endpoint sends it, no
		// Retry-After and no wait in its words: "Resource has been
		// exhausted (e.g. check quota)." with status RESOURCE_EXHAUSTED
		// (https://github.com/google-gemini/gemini-cli/issues/14811).
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"code": http.StatusTooManyRequests, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED",
		}})
		return
	}
	if p.dialect == Anthropic {
		// retry-after: "the number of seconds to wait until you can retry
		// the request" (https://docs.anthropic.com/en/api/rate-limits);
		// the body as in https://github.com/anthropics/claude-code/issues/71670.
		if !a.tooLarge {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((a.wait+time.Second-1)/time.Second), 10))
		}
		writeJSON(w, http.StatusTooManyRequests, anthropicError{Type: "error", Error: anthropicErrorBody{
			Type:    "rate_limit_error",
			Message: "This request would exceed your account's rate limit. Please try again later.",
		}})
		return
	}
	writeJSON(w, http.StatusTooManyRequests, openAIError{Error: openAIErrorBody{
		Message: openAIMessage(a),
		Type:    "tokens",
		Code:    "rate_limit_exceeded",
	}.typed(a)})
}

// openAIMessage is OpenAI's rate-limit message: "Rate limit reached for
// gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used
// 28039, Requested 3906. Please try again in 3.89s. …" (the shape of
// https://github.com/binary-husky/gpt_academic/issues/1213 and
// https://github.com/Aider-AI/aider/issues/3265), or, for a call above the
// limit, "Request too large for gpt-4o … Limit 30000, Requested 31538. …"
// (https://github.com/TheR1D/shell_gpt/issues/653).
func openAIMessage(a answer) string {
	const visit = " Visit https://platform.openai.com/account/rate-limits to learn more."
	model := a.cost.model
	if model == "" {
		model = "the model"
	}
	toks := a.cost.input + a.cost.output
	if a.tooLarge {
		return fmt.Sprintf("Request too large for %s in organization org-llmfake on tokens per min (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully.%s",
			model, a.tokens.limit, toks, visit)
	}
	b, per, requested := a.tokens, "tokens per min (TPM)", toks
	if a.limit == "requests" {
		b, per, requested = a.requests, "requests per min (RPM)", 1
	}
	return fmt.Sprintf("Rate limit reached for %s in organization org-llmfake on %s: Limit %d, Used %d, Requested %d. Please try again in %s.%s",
		model, per, b.limit, b.limit-b.remaining(a.now), requested, openAIDuration(a.wait), visit)
}

// writeCompletion writes a one-token reply the clients parse.
func (p *Provider) writeCompletion(w http.ResponseWriter, c cost) {
	if p.dialect == Anthropic {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": "msg_llmfake", "type": "message", "role": "assistant", "model": c.model,
			"content":     []map[string]string{{"type": "text", "text": "ok"}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]int64{"input_tokens": c.input, "output_tokens": 1},
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-llmfake", "object": "chat.completion", "created": 0, "model": c.model,
		"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": "ok"}, "finish_reason": "stop"}},
		"usage":   map[string]int64{"prompt_tokens": c.input, "completion_tokens": 1, "total_tokens": c.input + 1},
	})
}

// badRequest writes the dialect's 400 for a body it cannot read.
func (p *Provider) badRequest(w http.ResponseWriter, err error) {
	if p.dialect == Anthropic {
		writeJSON(w, http.StatusBadRequest, anthropicError{Type: "error", Error: anthropicErrorBody{Type: "invalid_request_error", Message: err.Error()}})
		return
	}
	writeJSON(w, http.StatusBadRequest, openAIError{Error: openAIErrorBody{Message: err.Error(), Type: "invalid_request_error"}})
}

type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

// typed sets the error type to the limit in the way, as OpenAI does
// ("requests" or "tokens").
func (e openAIErrorBody) typed(a answer) openAIErrorBody {
	if a.limit == "requests" && !a.tooLarge {
		e.Type = "requests"
	}
	return e
}

type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // the values above always marshal
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
