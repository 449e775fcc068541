package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"
)

// What the local model answers.
type answer int

const (
	answerOK          answer = iota // a summary
	answerRateLimited               // 429 with retry-after-ms: 30000
	answerTooLong                   // 400 context_length_exceeded
	answerNoChoices                 // 200 with an empty choices list
	answerBadKey                    // 401 invalid_api_key
	answerNoQuota                   // 429 insufficient_quota
)

// localBackends starts what the quickstart needs when no API key is set: an
// embedded Redis and a tiny OpenAI-compatible model that answers as told.
// calls counts the requests it received; stop shuts both down.
func localBackends(ans answer) (rdb *redis.Client, cfg openai.ClientConfig, calls *atomic.Int64, stop func()) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	calls = new(atomic.Int64)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch ans {
		case answerRateLimited:
			w.Header().Set("Retry-After-Ms", "30000")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
			return
		case answerTooLong:
			// The body OpenAI documents for a prompt over the context window.
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`))
			return
		case answerBadKey:
			// As reported in https://github.com/chatanywhere/GPT_API_free/issues/62.
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: sk-VKMIs***************************************wjh3. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
			return
		case answerNoQuota:
			// As reported in https://github.com/ChatGPTNextWeb/NextChat/issues/3123.
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
			return
		case answerNoChoices:
			_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`))
			return
		}
		_ = json.NewEncoder(w).Encode(openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{
			Message: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "A supplier contract: 400 units a month, 90 days' notice."},
		}}})
	}))
	rdb = redis.NewClient(&redis.Options{Addr: m.Addr()})
	cfg = openai.DefaultConfig("local")
	cfg.BaseURL = model.URL + "/v1"
	return rdb, cfg, calls, func() {
		_ = rdb.Close()
		model.Close()
		m.Close()
	}
}
