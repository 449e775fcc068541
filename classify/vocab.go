package classify

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The vocabulary holds two kinds of words:
//   - words that say a failure is about the account, the key, the
//     deployment or the provider's capacity rather than about the request;
//   - words that name the request itself.
//
// They are read in the codes, types and messages of a response the code
// tables left undecided. They match on word boundaries and
// case-insensitively: "insufficient_balance", "InsufficientBalance" and
// "insufficient balance" are the same words. A match of an account group
// only ever moves a verdict away from Failed. It moves it to systemic
// (pause or cool, never fail) or to transient. A match of a request group
// (gContent, gContext, gParam, gOrder) is proof. It is not when an
// account group or gMention also matches.

// group is what a vocabulary term says about a failure. The order is the
// precedence when several groups match one response.
type group uint8

const (
	gRate     group = iota + 1 // a rate: how fast, per what period; a 429 stays transient
	gOverload                  // the provider is out of capacity
	gMoney                     // billing, balance, credits, budgets, quota
	gRateName                  // "rate limit" named, with no period: weaker than money words
	gQuota                     // a quota exceeded: money, or a rate's quota that refills
	gAccount                   // the account is suspended, locked, inactive
	gNoModel                   // the deployment has no model loaded at all
	gModel                     // the model the request names is missing
	gLoad                      // the server cannot load the model the request names
	gAccess                    // no access to this model or resource
	gKey                       // the key or credentials
	gContent                   // proof: a content or guardrail verdict on this input
	gContext                   // proof: the input is larger than the model takes
	gParam                     // proof: a parameter or schema feature the model rejects
	gOrder                     // proof: the order or shape of the messages the model rejects
	gMention                   // no verdict: the text speaks of the account, so words prove nothing
)

// groupVerdict is each group's verdict.
var groupVerdict = [...]Verdict{
	gRate:     vRateLimited,
	gRateName: vRateLimited,
	gQuota:    vQuota,
	gOverload: vOverloaded,
	gMoney:    vQuota,
	gKey:      vAuthKey,
	gAccount:  {Class: ClassSystemic, Reason: ReasonAccount, ProviderWide: true},
	gNoModel:  {Class: ClassSystemic, Reason: ReasonModelNotFound, ProviderWide: true},
	gModel:    vModelNotFound,
	gLoad:     vModelNotFound,
	gAccess:   vPermission,
	gContent:  vContentFilter,
	gContext:  vContextLength,
	gParam:    vBadParameter,
	gOrder:    vBadParameter,
}

// term is one entry of the vocabulary. Its phrase matches consecutive
// words. A word ending in '*' matches any word it begins. With near, one
// of near's phrases must also start within window words of the phrase,
// on either side. With after, it must start within window words after
// it. not lists words that cancel the phrase right next to it: "budget
// tokens" is a request parameter, not money. unless lists phrases that
// cancel it anywhere in the text: they name another subject ("this model
// is unavailable for your account" is the model's, not the account's).
type term struct {
	g      group
	name   string // the Evidence word
	phrase string
	near   string // "|"-separated phrases
	after  string
	window int
	not    string
	unless string // "|"-separated phrases
}

// Qualifier lists shared by several terms.
const (
	limitWords   = "exceed*|exhaust*|insufficient|reach*|limit|limits|used up|run out|ran out|out of|over|crossed|depleted|zero|negative|no|not enough|low"
	planWords    = "upgrade*|paid|purchase*|subscribe*|expired|renew*|buy"
	accountNouns = "account|accounts|organization|organisation|org|team|workspace|tenant|your resource|your deployment|your project|entitlement*"
	accountState = "disabled|inactive|locked|blocked|terminated|closed|deleted|frozen|restricted|not active|not activated|not enabled|on hold"
	// modelAsRole follow "model" where it names a role in the
	// conversation, as "user" does, not the model that serves it.
	modelAsRole  = "turn|turns|role|roles"
	modelMissing = "not found|does not exist|do not exist|not exist|doesn t exist|not available|unavailable|not loaded|is unloaded|not deployed|not served|decommissioned|no longer available|no longer supported|not supported|is disabled|has been disabled|deprecated"
	negations    = "no|not have|don t have|doesn t have|lack*|without"
	verdictWords = "flagged|violat*|block*|reject*|intervened|triggered|cannot|refus*|prohibited|requires|remove|categor*"
)

// vocabulary lists every term, in no particular order. Groups decide
// precedence.
var vocabulary = [...]term{
	// A rate limit named ("RateLimitError", "higher rate limits", "Too
	// Many Requests", gRPC's "resource exhausted") says less than money
	// words beside it. Gateways name every 429 so, whatever it was.
	{g: gRateName, name: "rate_limit", phrase: "rate limit*"},
	{g: gRateName, name: "rate_limit", phrase: "ratelimit*"},
	{g: gRateName, name: "rate_limit", phrase: "rate limited"},
	{g: gRateName, name: "too_many_requests", phrase: "too many requests"},
	{g: gRateName, name: "resource_exhausted", phrase: "resource*", near: "exhaust*", window: 3},
	{g: gRate, name: "throttled", phrase: "throttl*"},
	{g: gRate, name: "concurrency", phrase: "concurrency"},
	{g: gRate, name: "per_minute", phrase: "per minute"},
	{g: gRate, name: "per_minute", phrase: "per min"},
	{g: gRate, name: "per_second", phrase: "per second"},
	{g: gRate, name: "per_hour", phrase: "per hour"},
	{g: gRate, name: "per_day", phrase: "per day"},
	{g: gRate, name: "rpm", phrase: "rpm"},
	{g: gRate, name: "tpm", phrase: "tpm"},
	{g: gRate, name: "rpd", phrase: "rpd"},
	{g: gRate, name: "tpd", phrase: "tpd"},
	{g: gRate, name: "per_minute", phrase: "minute|minutes|second|seconds|hour", near: "calls|call|requests|request|tokens", window: 2},

	{g: gOverload, name: "overloaded", phrase: "overload*"},
	{g: gOverload, name: "capacity", phrase: "capacity", near: "over|out of|at|exceed*|insufficient|no|reached", window: 2},
	{g: gOverload, name: "busy", phrase: "busy", near: "server*|too|engine|system", window: 2},
	{g: gOverload, name: "temporarily_unavailable", phrase: "temporarily unavailable"},
	// A gateway with no deployment of the model able to serve now
	// ("There are no healthy deployments for this model").
	{g: gOverload, name: "no_deployment", phrase: "no healthy deployment*"},
	// NVIDIA's "DEGRADED function cannot be invoked" is about the model's
	// deployment, never the request.
	{g: gOverload, name: "degraded", phrase: "degraded"},

	{g: gMoney, name: "billing", phrase: "billing"},
	{g: gMoney, name: "payment", phrase: "payment*"},
	{g: gMoney, name: "invoice", phrase: "invoice*"},
	{g: gMoney, name: "arrears", phrase: "arrear*"},
	{g: gMoney, name: "overdue", phrase: "overdue"},
	{g: gMoney, name: "unpaid", phrase: "unpaid"},
	{g: gMoney, name: "recharge", phrase: "recharge*"},
	{g: gMoney, name: "top_up", phrase: "top up"},
	{g: gMoney, name: "top_up", phrase: "topup"},
	{g: gMoney, name: "credit", phrase: "credit"},
	{g: gMoney, name: "credit", phrase: "credits"},
	{g: gMoney, name: "balance", phrase: "balance"},
	{g: gMoney, name: "funds", phrase: "funds"},
	{g: gMoney, name: "usage_limit", phrase: "usage limit*"},
	// Usage beyond a plan, billed or refused ("Contact your administrator
	// to enable overages").
	{g: gMoney, name: "overage", phrase: "overage*"},
	// A key's own spending cap ("Key limit exceeded (monthly limit)").
	// Only whoever manages the key lifts it.
	{g: gMoney, name: "key_limit", phrase: "key|keys", after: "limit|limits|budget|cap", window: 1},
	{g: gMoney, name: "budget", phrase: "budget*", near: limitWords, window: 4, not: "token|tokens|thinking|reasoning"},
	{g: gMoney, name: "spend_limit", phrase: "spend*", near: limitWords + "|cap", window: 3},
	// A quota is money (OpenAI's insufficient_quota) or a rate that
	// refills (Vertex's "Resource has been exhausted (e.g. check
	// quota)"). A rate named beside it wins.
	{g: gQuota, name: "quota", phrase: "quota*", near: limitWords, window: 4},
	// A quota that "will reset after 8h44m7s" is spent until then.
	{g: gQuota, name: "quota", phrase: "quota", after: "reset*", window: 2},
	{g: gMoney, name: "plan", phrase: "plan", near: planWords, window: 4},
	{g: gMoney, name: "subscription", phrase: "subscription*", near: planWords + "|inactive|not active", window: 4},
	{g: gMoney, name: "tier", phrase: "tier", near: planWords, window: 4},
	{g: gMoney, name: "period_limit", phrase: "monthly|weekly|yearly|annual", near: "limit|limits|quota|usage|cap|budget|spend*", window: 3},
	{g: gMoney, name: "period_limit", phrase: "month|months|week|year", near: "calls|call|requests|request|tokens|limit|limits|limited|quota|usage", window: 2},

	{g: gKey, name: "api_key", phrase: "api key*"},
	{g: gKey, name: "api_key", phrase: "apikey*"},
	{g: gKey, name: "access_key", phrase: "access key*"},
	{g: gKey, name: "secret_key", phrase: "secret key*"},
	{g: gKey, name: "subscription_key", phrase: "subscription key*"},
	{g: gKey, name: "token", phrase: "access token"},
	{g: gKey, name: "token", phrase: "bearer token"},
	{g: gKey, name: "token", phrase: "auth token"},
	{g: gKey, name: "token", phrase: "security token"},
	{g: gKey, name: "token", phrase: "session token"},
	{g: gKey, name: "token", phrase: "expired token"},
	{g: gKey, name: "credentials", phrase: "credential*"},
	{g: gKey, name: "authentication", phrase: "authenticat*"},
	{g: gKey, name: "authentication", phrase: "unauthenticated"},
	{g: gKey, name: "unauthorized", phrase: "unauthori?ed"},
	// A request's signature (AWS SigV4: "The request signature we
	// calculated does not match"), not a content block's: "Invalid
	// `signature` in `thinking` block" names a part of the conversation.
	{g: gKey, name: "signature", phrase: "signature", near: "invalid|incomplete|not|match*|expired", window: 4, unless: "block|blocks|thinking|thought"},

	{g: gAccount, name: "suspended", phrase: "suspend*"},
	{g: gAccount, name: "deactivated", phrase: "deactivat*"},
	{g: gAccount, name: "banned", phrase: "banned"},
	// Bedrock's ValidationException "Operation not allowed". The account
	// is blocked from invoking models, whatever the request.
	{g: gAccount, name: "operation_not_allowed", phrase: "operation not allowed"},
	// OpenAI's "Your access was terminated due to violation of our
	// policies" (even under a 429). A key Google blocked as leaked. Every
	// call fails, whatever the request.
	{g: gAccount, name: "access_terminated", phrase: "access", after: "terminated|revoked", window: 3},
	{g: gAccount, name: "leaked", phrase: "leaked"},
	{g: gAccount, name: "account_state", phrase: accountNouns, near: accountState, window: 8},
	// The account refused, with no model named: "Your project has been
	// denied access", Workers AI's "Service unavailable for account",
	// "Guardrail entitlement is missing". Every call of the account fails.
	// Where a model, deployment or endpoint is named, the refusal is that
	// one's ("This model is unavailable for your account"). A field named
	// for the account is the request's ("missing field account_id",
	// "Missing organization header").
	{g: gAccount, name: "account_state", phrase: accountNouns, near: "denied|unavailable|not available|missing|refused", window: 8,
		not: "id|ids|header|headers|field|fields|param|parameter|name", unless: "model|models|deployment|deployments|endpoint|endpoints"},

	{g: gNoModel, name: "no_model_loaded", phrase: "no model|no models", after: "loaded|load*|available|running", window: 3},

	// "model" before "turn" or "role" is a role in the conversation, as
	// "user" is ("Requests ending with a model turn are not supported"),
	// not the model that serves it.
	{g: gModel, name: "model", phrase: "model|models", not: modelAsRole, after: modelMissing, window: 8},
	{g: gModel, name: "model", phrase: "unknown model|invalid model|nonexistent model|no such model|not a valid model"},
	// A model named against a list or as missing: "model must be one of".
	// That is the deployment's choice of models, not this request's words.
	{g: gModel, name: "model", phrase: "model", after: "must be one of|should be one of|is not one of|is not valid|not valid|is invalid", window: 2},
	// A router with no endpoint to serve the model ("no endpoints
	// available for this model under your current plan", OpenRouter's "No
	// endpoints found"). That is the model's availability, never the
	// request's.
	{g: gModel, name: "model", phrase: "no endpoint|no endpoints", near: "model|models|found", window: 4},
	// A retired model named at length ("Model meta.llama-3.1-70b-instruct
	// 1.0.0 is retired": the id alone is eleven words).
	{g: gModel, name: "model", phrase: "retired|decommissioned|end of life", near: "model|models", window: 12},

	// A model the server cannot load: "error loading model: unable to
	// allocate CUDA_Host buffer", LocalAI's "could not load model", Ollama's
	// "model requires more system memory (3.7 GiB) than is available (3.6
	// GiB)". Under the server's own 5xx too: the same model fails to load
	// until its operator acts, while a model that is only still loading
	// ("Loading model") names no failure and stays the server's.
	{g: gLoad, name: "model_load", phrase: "failed to load model|failed to load the model|failed loading model|error loading model|error loading the model|could not load model|could not load the model|couldn t load model|unable to load model|unable to load the model|cannot load model|can not load model|model failed to load|model load failed|model loading failed"},
	{g: gLoad, name: "model_memory", phrase: "more system memory|more memory|more vram|more gpu memory|not enough memory|insufficient memory|insufficient system resources", near: "model|models", window: 8},

	{g: gAccess, name: "permission", phrase: "permission*"},
	{g: gAccess, name: "access_denied", phrase: "access denied|denied access|access is denied|not allowed to access|not permitted to access"},
	{g: gAccess, name: "no_access", phrase: "access", near: negations, window: 3},
	{g: gAccess, name: "not_authorized", phrase: "not authori?ed"},
	{g: gAccess, name: "verification", phrase: "verif*", near: accountNouns + "|identity", window: 4},

	{g: gContent, name: "content_policy", phrase: "content policy|content policies|content filter*|content management|safety system|flagged|inappropriate|unsafe|sensitive content|high risk"},
	{g: gContent, name: "content_policy", phrase: "content", near: "risk|risky", window: 2},
	{g: gContent, name: "content_policy", phrase: "data inspection|safety filter*|safety polic*|usage polic*"},
	{g: gContent, name: "content_policy", phrase: "prohibited content|sensitive word|sensitive words|prompt injection|jailbreak|allow patterns|deny patterns"},
	{g: gContent, name: "content_policy", phrase: "content blocked|prompt blocked|input blocked|message blocked|blocked content|blocked prompt"},
	{g: gContent, name: "content_policy", phrase: "usage guidelines|content guidelines|community guidelines", near: verdictWords, window: 4},
	// What blocked the request must judge content. A firewall or a policy
	// may block an address ("blocked by IP allowlist policy").
	{g: gContent, name: "guardrail", phrase: "blocked by|rejected by|denied by|filtered by|flagged by|stopped by", after: "firewall for ai|ai firewall|guard|guardrail*|content filter*|safety filter*|prompt shield*|moderation", window: 4},
	// A moderation or guardrail service is named by an outage too
	// ("Bedrock guardrail request failed"). Only a verdict is proof.
	{g: gContent, name: "moderation", phrase: "moderation", near: verdictWords, window: 6},
	{g: gContent, name: "guardrail", phrase: "guardrail*", near: verdictWords, window: 6},

	{g: gContext, name: "context_length", phrase: "context length|context window|context size|maximum context|context limit"},
	{g: gContext, name: "context_length", phrase: "token limit|tokens limit|too many tokens|prompt too long|prompt is too long|input too long|input is too long"},
	{g: gContext, name: "context_length", phrase: "input token count|maximum number of tokens|input must have less than|inputs must have less than|prompt must have less than"},
	{g: gContext, name: "context_length", phrase: "input tokens|inputs tokens|prompt tokens", near: "exceed*|must be|maximum|limit|too many", window: 6},
	{g: gContext, name: "context_length", phrase: "prompt length|input length|sequence length|prompt size|input size", near: "maximum|max|exceed*|contains|greater|larger|longer|too long|more than", window: 6},
	// A maximum length and what the request has: "expected maxLength:
	// 42000, actual: 46735", "exceeds maximum length of 7000 characters
	// (current: 12317)".
	{g: gContext, name: "context_length", phrase: "max length|maximum length", near: "actual|exceed*|current|received|given|got|greater|longer|more than", window: 6},

	{g: gParam, name: "schema", phrase: "invalid schema|schema is invalid|invalid json schema|schema invalid"},
	{g: gParam, name: "parameter", phrase: "unknown parameter*|unrecognized parameter*|unsupported parameter*|unrecognized request argument*|unknown name|unknown field*|unknown variant|invalid value at|field invalid|proto is invalid|extra inputs|extra forbidden|additional properties are not allowed|failed to satisfy constraint"},
	{g: gParam, name: "not_supported", phrase: "not supported|unsupported"},
	// A value the API's validation rejects: "'temperature' : value must be
	// a number", "the valid range of max_tokens is [1, 8192]", "invalid
	// type: sequence, expected a string", "invalid reasoning value".
	{g: gParam, name: "parameter", phrase: "value must be|valid range|must be one of|expected one of|invalid type|expected a string|expected a number|expected an object|expected an array"},
	{g: gParam, name: "parameter", phrase: "invalid", after: "value|values", window: 3},
	// A value of the wrong type or over a stated count: "stream must be a
	// boolean", "Cannot determine type of 'item'", "supports at most 1
	// image per prompt".
	{g: gParam, name: "parameter", phrase: "must be", after: "a boolean|an integer|a string|a number|an array|an object|a list", window: 1},
	{g: gParam, name: "parameter", phrase: "cannot determine type|could not determine type|unable to determine type|supports at most|accepts at most|allows at most"},
	// The idioms of an API's validation of a named field: "contents.parts
	// must not be empty", "Content length must be greater than 0",
	// "tools.function.parameters is not a valid ... json schema",
	// "message[3].content[2] has invalid field(s)", "cannot be used with
	// reasoning.effort", "Range of max_tokens should be [1, 8192]".
	{g: gParam, name: "validation", phrase: "is required|are required|required field|field required|must not be empty|cannot be empty|can not be empty|should not be empty|must be non empty|must be at least|must be at most|must be greater than|must be less than|must be between|should be between|should be one of|must be valid|is not a valid|not a valid|is not valid|input should be|does not match|did not match|validation failed|not an allowed value|invalid base64|only allowed when|only allowed if|only allowed with|not configurable|cannot be configured|invalid field|invalid fields|cannot be used with|can not be used with|not compatible with|incompatible with"},
	{g: gParam, name: "validation", phrase: "range", near: "should be|must be", window: 4},
	// A size over a stated limit in units: "image exceeds 5 MB maximum",
	// "the image dimensions exceed max allowed size ... 2000 pixels".
	{g: gParam, name: "size", phrase: "exceed*", near: "mb|kb|gb|bytes|pixels|dimension*", window: 4},
	// A value or mode the model takes alone, said of the value ("Only a
	// tool_choice of 'auto' is supported", "only 1 is allowed for this
	// model") or of the model ("This model only supports stream mode").
	// It is a setting the request must change. "Allowed" and "permitted"
	// are also the words of access ("Only whitelisted IPs are allowed"),
	// so with them the value must be a number.
	{g: gParam, name: "validation", phrase: "only", after: "is supported|are supported|is accepted|are accepted", window: 6},
	{g: gParam, name: "validation", phrase: "only #", after: "is allowed|are allowed|is permitted|are permitted", window: 3},
	{g: gParam, name: "validation", phrase: "only support|only supports|only accept|only accepts"},
	// A body that is not JSON the API can read: "The request body is not
	// valid JSON", "Failed to parse the request body as JSON", "Failed to
	// deserialize the JSON body".
	{g: gParam, name: "malformed_body", phrase: "not valid json|invalid json|malformed json|failed to deserialize|failed to parse the request body|failed to parse request body|failed to parse request"},
	{g: gParam, name: "not_permitted", phrase: "not permitted", near: "key|keys|input|inputs|field|fields|parameter*|argument*|propert*", window: 4},
	{g: gOrder, name: "roles_alternate", phrase: "must alternate|alternate between"},
	// The order of the messages: "Expected last role User or Tool",
	// "Unexpected role 'user' after role 'tool'", "A conversation must
	// start with a user message", "first message must use the user role".
	{g: gOrder, name: "message_order", phrase: "unexpected role|expected last role|last role|first message", near: "role|roles|user|assistant|tool|system|after|got|must", window: 6},
	{g: gOrder, name: "message_order", phrase: "must start with|must begin with|should start with|must end with", near: "user|assistant|message|role", window: 4},
	// The shape of a message: "final assistant content cannot end with
	// trailing whitespace", "The final block in an assistant message
	// cannot be `thinking`".
	{g: gOrder, name: "message_order", phrase: "final assistant|last assistant|final block|last block|final message|last message|assistant message|assistant content", near: "cannot|must|should|missing|required", window: 6},
	// Turns of a conversation with tools: "function call turn comes
	// immediately after a user turn", "the number of function response
	// parts is equal to the number of function call parts".
	{g: gOrder, name: "message_order", phrase: "user turn|model turn|function call turn|function response turn|function call parts|function response parts"},
	{g: gOrder, name: "message_order", phrase: "tool result*|tool use|tool call*|function call*|function response*", near: "must be|must have|follow|must immediately|without|corresponding|preceding|preceeding|previous|immediately after|cannot|same turn", window: 6},
	// What the messages must hold: "Each message must have at least one
	// content element", "'messages' must contain the word 'json'".
	{g: gOrder, name: "message_order", phrase: "message|messages", after: "must contain|must include|must have|must not be empty", window: 2},
	// Where a system message may stand: "system message must be at the
	// beginning", "only one system message is allowed".
	{g: gOrder, name: "message_order", phrase: "system message|system messages|system prompt|system role", near: "must be at|beginning|first|only one|not allowed|cannot", window: 6},
	// A reasoning model's own output passed back with the history, or
	// not: "Missing `reasoning_content` field in the assistant message",
	// "The `reasoning_content` in the thinking mode must be passed back".
	{g: gOrder, name: "message_order", phrase: "reasoning content|thinking block|thinking blocks|thought signature|thought signatures", near: "must|missing|required|cannot|without", window: 8},
	// A setting the model cannot take or turn off: "does not support
	// tools", "cannot both be specified", "Developer instruction is not
	// enabled for models/gemma-3-27b-it".
	{g: gParam, name: "not_supported", phrase: "does not support|do not support|doesn t support|don t support"},
	{g: gParam, name: "not_supported", phrase: "cannot both be|can not both be|mutually exclusive|cannot be used together|cannot be combined|may only be set|can only be set"},
	{g: gParam, name: "not_supported", phrase: "not enabled for model|not enabled for models|not enabled for this model|not available for this model"},
	{g: gParam, name: "max_tokens", phrase: "max tokens|max new tokens|max completion tokens|max output tokens|maximum tokens|max tokens to sample", near: "exceed*|must be|maximum|limit|too large|greater|larger|at most|above", window: 10},

	// Words about the account that name no verdict of their own. Where
	// they appear, words about the request prove nothing.
	{g: gMention, name: "account", phrase: accountNouns + "|team|plan|plans|subscription*|tier|billing|quota*|credit|credits|balance|credential*|permission*|country|region|territory|location|spend*|payment*"},
	{g: gMention, name: "account", phrase: "budget*", not: "token|tokens|thinking|reasoning"},
}

// cjkTerms are matched as substrings: Chinese text has no word boundaries.
var cjkTerms = [...]struct {
	s    string
	g    group
	name string
}{
	{"欠费", gMoney, "arrears"},
	{"余额", gMoney, "balance"},
	{"充值", gMoney, "recharge"},
	{"限流", gRate, "throttled"},
	// A rate in Chinese: "您的账户已达到速率限制，请您控制请求频率" (the
	// account has reached its rate limit). The rate group comes before the
	// account's state, which "账户已" only begins.
	{"速率", gRate, "throttled"},
	{"请求频率", gRate, "throttled"},
	{"账户已", gAccount, "account_state"},
	{"封禁", gAccount, "banned"},
	{"敏感词", gContent, "content_policy"},
	{"敏感内容", gContent, "content_policy"},
}

// compiled is a term split into words. Alternatives are expanded.
type compiled struct {
	g             group
	name          string
	phrase        [][]string // alternatives, each a sequence of word patterns
	near, after   [][]string
	unless        [][]string
	window        int
	not           []string
	nearWithAfter bool
}

var compiledVocabulary = compileVocabulary()

func compileVocabulary() []compiled {
	split := func(s string) [][]string {
		if s == "" {
			return nil
		}
		var out [][]string
		for _, alt := range strings.Split(s, "|") {
			out = append(out, strings.Fields(alt))
		}
		return out
	}
	out := make([]compiled, 0, len(vocabulary))
	for _, t := range vocabulary {
		c := compiled{g: t.g, name: t.name, phrase: split(t.phrase), near: split(t.near), after: split(t.after), unless: split(t.unless), window: t.window}
		if t.not != "" {
			c.not = strings.Split(t.not, "|")
		}
		out = append(out, c)
	}
	return out
}

// wordMatch reports whether the word w fits the pattern p. It fits
// exactly, as a prefix ("suspend*"), with one letter free
// ("unauthori?ed"), or as a number ("#": digits only).
func wordMatch(p, w string) bool {
	if p == "#" {
		return w != "" && strings.IndexFunc(w, func(r rune) bool { return r < '0' || r > '9' }) < 0
	}
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(w, prefix)
	}
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return len(w) == len(p) && w[:i] == p[:i] && w[i+1:] == p[i+1:]
	}
	return p == w
}

// phraseAt returns the positions at which any alternative of ph starts in
// words, with each occurrence's length.
func phraseAt(words []string, ph [][]string, visit func(start, n int) bool) bool {
	for _, alt := range ph {
		for i := 0; i+len(alt) <= len(words); i++ {
			ok := true
			for j, p := range alt {
				if !wordMatch(p, words[i+j]) {
					ok = false
					break
				}
			}
			if ok && visit(i, len(alt)) {
				return true
			}
		}
	}
	return false
}

// matches reports whether t matches words.
func (t *compiled) matches(words []string) bool {
	if t.unless != nil && phraseAt(words, t.unless, func(int, int) bool { return true }) {
		return false
	}
	return phraseAt(words, t.phrase, func(start, n int) bool {
		for _, w := range t.not {
			if (start > 0 && words[start-1] == w) || (start+n < len(words) && words[start+n] == w) {
				return false
			}
		}
		switch {
		case t.near != nil:
			return phraseAt(words, t.near, func(q, m int) bool {
				return (q >= start+n && q-(start+n) < t.window) || (q < start && start-(q+m) < t.window)
			})
		case t.after != nil:
			return phraseAt(words, t.after, func(q, _ int) bool {
				return q >= start+n && q-(start+n) < t.window
			})
		}
		return true
	})
}

// maxWords bounds how many words of one field are read. Error messages
// are short. The bound keeps a hostile body's cost linear and small.
const maxWords = 256

// words splits s into lower-case words. It splits at every character that
// is not a letter or a digit. It splits between a lower-case letter and
// an upper-case one too ("InsufficientBalance", "APIKey" → "api", "key").
// Links (http:// and https:// up to the next space) are skipped. So are
// JSON pointers (pointer.go) and the label before one.
func words(s string) []string {
	var (
		out     []string
		cur     strings.Builder
		prev    rune
		lastEnd int // where the last word ended
	)
	flush := func(at int) {
		if cur.Len() > 0 && len(out) < maxWords {
			out = append(out, cur.String())
			lastEnd = at
		}
		cur.Reset()
	}
	skipTo := 0
	for i, r := range s {
		if len(out) >= maxWords {
			break
		}
		if i < skipTo {
			continue
		}
		if r == 'h' && (strings.HasPrefix(s[i:], "https://") || strings.HasPrefix(s[i:], "http://")) {
			// A link is an address, not words. "json-schema.org" is no
			// organisation; ".../rate-limits" is no rate limit.
			flush(i)
			skipTo = i + len(s[i:]) - len(strings.TrimLeftFunc(s[i:], func(r rune) bool { return !unicode.IsSpace(r) }))
			prev = ' '
			continue
		}
		if n := pointerAt(s, i); n > 0 {
			// A JSON pointer is an address in the request, not words:
			// "Location: /properties/messages/items" names no location,
			// so its label goes with it.
			flush(i)
			if len(out) > 0 && isLabel(out[len(out)-1], s[lastEnd:i]) {
				out = out[:len(out)-1]
			}
			skipTo = i + n
			prev = ' '
			continue
		}
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			prev = r
			continue
		}
		if unicode.IsUpper(r) && cur.Len() > 0 {
			next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && unicode.IsLower(next)) {
				flush(i)
			}
		}
		cur.WriteRune(unicode.ToLower(r))
		prev = r
	}
	flush(len(s))
	return out
}

// field is one part of a response the vocabulary reads, named for Evidence.
type field struct {
	name, text string
}

// vocabMatch finds the first of groups, in their order, whose terms match
// any of fields. It returns it with its Evidence ("message:balance"). The
// error type is read last, on its own. Providers file money problems under
// their rate-limit type: Anthropic's spend limits and Moonshot's suspended
// accounts come as rate_limit_error-like types. So the type's coarse
// words must not outweigh the specific ones of a code or message.
func vocabMatch(fields []field, groups ...group) (group, string) {
	var typ []field
	for i, f := range fields {
		if f.name == "type" {
			typ = fields[i : i+1]
			fields = append(fields[:i:i], fields[i+1:]...)
			break
		}
	}
	if g, ev := vocabFields(fields, groups); g != 0 {
		return g, ev
	}
	return vocabFields(typ, groups)
}

// vocabFields is vocabMatch over fields, group by group.
func vocabFields(fields []field, groups []group) (group, string) {
	split := make([][]string, len(fields))
	for i, f := range fields {
		split[i] = words(f.text)
	}
	for _, g := range groups {
		for i, f := range fields {
			for k := range compiledVocabulary {
				t := &compiledVocabulary[k]
				if t.g == g && t.matches(split[i]) {
					return g, f.name + ":" + t.name
				}
			}
			for _, c := range cjkTerms {
				if c.g == g && strings.Contains(f.text, c.s) {
					return g, f.name + ":" + c.name
				}
			}
		}
	}
	return 0, ""
}
