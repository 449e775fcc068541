-- Record a settled call in its upstream's budget: release its reservation
-- and keep the reading its responses gave, per limit, unless the budget
-- holds a newer one: one that leaves less now, both refilled as they say
-- (a reading includes every call decided before it, so at the limit the
-- newer leaves less; comparing resets instead would trust a reset rounded
-- to the second, as Anthropic's are), the later reading at equal levels
-- or when either cannot say how it refills (but one that cannot never
-- leaves more than one that can, before its reset); a reading with more
-- left than its limit's size is not kept.
-- ARGV[1] the member to release ("" for none), ARGV[2] the margin ms the
-- budget outlives its last reset or reading by; then per limit (requests
-- at ARGV[3], tokens at ARGV[7]): what was left (-1: not reported), the
-- limit's size (0: not said), the time from the reading to its reset
-- (ms, -1: not said), and the reading's age (ms, when it was taken before
-- now: the reading is anchored on Redis's clock); ARGV[11] the wait a 429
-- stated for the call, from now (ms, 0: none), and ARGV[12] the call's
-- tokens (0: not said): until then a call of that size, or any that does
-- not say its tokens, does not fit (budget_cost.lua); ARGV[13] '1' when the call
-- was refused (a 429 spends no tokens), else '0'. Every token reading of a
-- call served is a call the learned cost counts.
-- ARGV[14] what a call settled with no reading teaches the rate learned
-- of a provider that reports none (budget_learn.lua's answer; '' for
-- nothing), ARGV[15] how long it ran (ms), ARGV[16] how long what is
-- learned is kept (ms): the release and the lesson are one script.
-- Reply: the number of limits written.
if ARGV[1] ~= '' then
  redis.call('ZREM', KEYS[3], ARGV[1])
end
-- The calls that lapsed (a crashed process's) go here, not where calls
-- are judged: an acquire writes nothing before it takes its job.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', NOW)
local wrote = 0
-- The budget is read once, and kept as written: each limit writes only
-- its own fields.
local b
for i, p in ipairs(KINDS) do
  local o = 3 + (i - 1) * 4
  local rem = tonumber(ARGV[o])
  local lim = tonumber(ARGV[o + 1])
  -- More left than the limit's size: no bucket holds that (bad input).
  if rem >= 0 and not (lim > 0 and rem > lim) then
    local at = NOW - tonumber(ARGV[o + 3])
    local rst = 0
    if tonumber(ARGV[o + 2]) >= 0 then
      rst = at + tonumber(ARGV[o + 2])
    end
    b = b or budget()
    local cur = b[p]
    local q = {at = at, rem = rem, lim = tonumber(ARGV[o + 1]), rst = rst}
    local newer = not cur
    if cur and refills(q) and refills(cur) and level(q) ~= level(cur) then
      newer = level(q) < level(cur)
    elseif cur and refills(cur) and not refills(q) and at < cur.rst then
      -- A reading that cannot say how it refills (whole already, a reset
      -- past or not said) does not leave more than one that can, before
      -- that one's reset: bad input never admits more than was known.
      newer = q.rem <= level(cur)
    elseif cur then
      newer = at > cur.at
    end
    if newer then
      redis.call('HSET', KEYS[2], p .. 'a', at, p .. 'r', rem, p .. 'l', tonumber(ARGV[o + 1]), p .. 't', rst)
      b[p] = q
      wrote = wrote + 1
    end
    if p == 't' then
      learn(KEYS[2], q, ARGV[13] ~= '1')
    end
  end
end
local fits = tonumber(ARGV[11]) or 0
if fits > 0 and next(b or budget()) ~= nil then
  -- -1: a call that did not say its tokens (budget_cost.lua's short).
  local size = tonumber(ARGV[12]) or 0
  if size == 0 then
    size = -1
  end
  -- The hash keeps its TTL, which outlives the wait (at least a lease).
  redis.call('HSET', KEYS[2], 'cw', NOW + fits, 'cs', size)
end
if wrote > 0 then
  local last = NOW
  for _, q in pairs(b) do
    last = math.max(last, q.rst, q.at)
  end
  redis.call('PEXPIRE', KEYS[2], last - NOW + tonumber(ARGV[2]))
end
if (ARGV[14] or '') ~= '' then
  teach(KEYS[2], KEYS[3], ARGV[14], tonumber(ARGV[15]), tonumber(ARGV[16]))
end
return wrote
