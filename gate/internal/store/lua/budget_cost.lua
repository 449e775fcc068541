-- (Prepended after budget_left.lua to the scripts that admit calls or
-- record readings.) What one call costs of the token limit, learned from
-- the drop in "remaining" across the calls answered, for calls that do not
-- say their tokens; and the short wait a 429 stated for one call's size.
-- Fields of the budget hash (they live and lapse with it):
--   ca, cr, cl, ct  the anchor: a token reading (at, rem, lim, rst) the
--                   next sample measures the drop from;
--   cn              the readings recorded since the anchor: one per call
--                   answered (each response's reading follows its call);
--   cc              the learned cost of one call, tokens (absent: none
--                   learned yet);
--   cv              the learned variance of one call's cost: calls vary
--                   (prompts of 300 to 500 tokens), and a call larger than
--                   the mean is refused where only the mean is left, so
--                   admission keeps two deviations of the undeclared
--                   calls' sum unspent;
--   cw, cs          a 429's short wait: until cw (Redis ms) a call of at
--                   least cs tokens does not fit; cs -1: the refused call
--                   did not say its tokens, so no such call fits, nor one
--                   that says at least the learned cost.

-- COST_CALLS is how many calls a sample spans at least: a call decided
-- before the anchor may settle after it and a call decided before the
-- sample after it, so a span of a few calls keeps that error a fraction;
-- every call is counted once, in whichever span its settle lands.
local COST_CALLS = 4
-- COST_KEEP is the weight a learned cost keeps per call sampled: a sample
-- of n calls moves it by 1 - COST_KEEP^n, so the cost follows a change of
-- prompts within a few dozen calls.
local COST_KEEP = 0.9

-- cost is the learned cost of one call and the tokens kept unspent for
-- n undeclared calls (1 when not said) costing more than it: two
-- deviations of their sum, which grows as the square root of n (calls
-- vary independently; one deviation kept for 16 calls in flight left a
-- 429 a hundred calls on a loaded machine); nil when none is learned yet.
local function cost(k, n)
  local v = redis.call('HMGET', k or KEYS[2], 'cc', 'cv')
  local c = tonumber(v[1])
  if not c then
    return nil, 0
  end
  return c, math.ceil(2 * math.sqrt((tonumber(v[2]) or 0) * math.max(n or 1, 1)))
end

-- learn counts the call whose response gave token reading q (written or
-- not; spent: it was served, where a 429 spent nothing) and, once the
-- anchor is COST_CALLS calls old, takes a sample: the tokens the anchor's
-- level, refilled to q.at, lost by q, per call counted. A span the bucket
-- could have refilled to whole in (past the anchor's reset), or over a
-- limit that changed size, says nothing: the anchor starts over at q.
local function learn(k, q, spent)
  local v = redis.call('HMGET', k, 'ca', 'cr', 'cl', 'ct', 'cn', 'cc', 'cv')
  local n = tonumber(v[5]) or 0
  if spent then
    n = n + 1
  end
  local a = nil
  if v[1] then
    a = {at = tonumber(v[1]), rem = tonumber(v[2]), lim = tonumber(v[3]), rst = tonumber(v[4])}
  end
  if a and q.at <= a.at then
    redis.call('HSET', k, 'cn', n)
    return
  end
  if a and n >= COST_CALLS and refills(a) and q.lim == a.lim and q.at < a.rst then
    local drop = a.rem + (a.lim - a.rem) * (q.at - a.at) / (a.rst - a.at) - q.rem
    if drop > 0 then
      -- A sample is a mean of n calls: its deviation from the cost, times
      -- the square root of n, is one call's.
      local sample = drop / n
      local c, var = tonumber(v[6]), tonumber(v[7])
      if c then
        local w = 1 - COST_KEEP ^ n
        var = var + w * (n * (sample - c) ^ 2 - var)
        c = c + w * (sample - c)
      else
        -- The first sample: a deviation of half a call, until more come.
        c, var = sample, (sample / 2) ^ 2
      end
      redis.call('HSET', k, 'cc', c, 'cv', var)
    end
  elseif a and n < COST_CALLS and q.lim == a.lim and (not refills(a) or q.at < a.rst) then
    redis.call('HSET', k, 'cn', n)
    return
  end
  redis.call('HSET', k, 'ca', q.at, 'cr', q.rem, 'cl', q.lim, 'ct', q.rst, 'cn', 0)
end

-- short is the 429's short wait at k while it lasts, else nil: {untl,
-- size}, the least tokens a call of tokens (0: not said) must say to be
-- refused until untl.
local function short(k, tokens)
  local v = redis.call('HMGET', k, 'cw', 'cs')
  local untl = tonumber(v[1])
  if not untl or untl <= NOW then
    return nil
  end
  local size = tonumber(v[2]) or 0
  if size < 0 then
    size = 0
    if tokens > 0 then
      size = math.ceil(cost(k) or 0)
    end
  end
  return {untl = untl, size = size}
end
