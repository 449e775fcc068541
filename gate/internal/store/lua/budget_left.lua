-- (Prepended to every budget script.) An upstream's budget, as its
-- provider last reported it: KEYS[1] the upstream's key, KEYS[2] the
-- budget, a hash with four fields per limit p (r requests, t tokens):
-- <p>a when the reading was taken (Redis ms), <p>r what was left then,
-- <p>l the limit's size (0: not said), <p>t when it is whole again (Redis
-- ms; 0: not said); KEYS[3] the calls admitted against it and not yet
-- settled, a sorted set of "<token>:<tokens>" scored by when the admission
-- lapses (Redis ms: a crashed process's calls lapse with their lease).
local T = redis.call('TIME')
local NOW = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)
local KINDS = {'r', 't'}

-- budget reads the hash (k, else KEYS[2]): {r = quota or nil, t = quota
-- or nil}.
local function budget(k)
  local v = redis.call('HMGET', k or KEYS[2], 'ra', 'rr', 'rl', 'rt', 'ta', 'tr', 'tl', 'tt')
  local b = {}
  for i, p in ipairs(KINDS) do
    local o = (i - 1) * 4
    if v[o + 1] then
      b[p] = {at = tonumber(v[o + 1]), rem = tonumber(v[o + 2]), lim = tonumber(v[o + 3]), rst = tonumber(v[o + 4])}
    end
  end
  return b
end

-- refills reports whether a quota says how it refills: its size and when
-- it is whole, after the reading.
local function refills(q)
  return q.lim > q.rem and q.rst > q.at
end

-- level is what a quota that refills holds at NOW, refilled evenly from
-- what was left at the reading to its size at its reset, as a token
-- bucket does.
local function level(q)
  if NOW >= q.rst then
    return q.lim
  end
  return q.rem + (q.lim - q.rem) * (NOW - q.at) / (q.rst - q.at)
end

-- left estimates what a quota holds at NOW, in whole units; nil once a
-- quota of unknown size reset (more is left, how much is not known).
local function left(q)
  if refills(q) then
    return math.floor(level(q))
  end
  if q.rst > 0 and NOW >= q.rst and q.lim == 0 then
    return nil
  end
  return q.rem
end

-- calls counts the calls admitted and not lapsed (in k, else KEYS[3]),
-- their tokens, and those that did not say their tokens (their member
-- ends ":0"), in one read of the set. (Each member costs Lua work: an
-- anchored match backtracks from the end, where ':(%d+)$' tries every
-- start; 64 calls in flight cost 27 µs of Redis time that way, 18 so.)
local function calls(k)
  local n, tokens, unsaid = 0, 0, 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', k or KEYS[3], '(' .. NOW, '+inf')) do
    n = n + 1
    local said = string.match(m, '^.*:(%d+)$')
    if said == '0' then
      unsaid = unsaid + 1
    elseif said then
      tokens = tokens + tonumber(said)
    end
  end
  return n, tokens, unsaid
end

-- inflight counts the calls admitted and not lapsed in k, where their
-- tokens do not matter (no token limit): no Lua work per call.
local function inflight(k)
  return #redis.call('ZRANGEBYSCORE', k, '(' .. NOW, '+inf')
end
