-- Learn an upstream's rate from a call settled with no reading
-- (budget_learned.lua): KEYS as budget_left.lua's; ARGV[1] 1 the provider
-- accepted the call, 0 it refused it with a 429, 2 it answered otherwise
-- (that it sends no budget is all that tells); ARGV[2] how long the
-- call ran (ms); ARGV[3] how long what is learned is kept (ms).
-- An accepted call counts toward the probe upward. A 429 of a call that
-- began after the last cut ends the run since: the rate is cut to
-- LEARN.beta × the lower of the rate admitted and the rate the provider
-- accepted lately (the window's count, from every process), or by
-- LEARN.hard when the last cut was just made. A 429 of a call
-- that began before the last cut is that cut's, and cuts nothing.
-- Until a 429 no limit is known (admission leaves the calls unjudged);
-- the first one cuts the rate the provider accepted lately when enough
-- calls tell it, else one call per ARGV[2] (one call at a time), from
-- which the rate starts slowly.
-- Reply: the rate held now, in calls a minute, rounded down (that of one
-- call at a time while no limit is known).
local k = KEYS[2]
local ok, ran, keep = ARGV[1] == '1', math.max(tonumber(ARGV[2]), 1), tonumber(ARGV[3])
local answered = ARGV[1] == '2' 
local h = learned(k)
if not h or not tonumber(redis.call('HMGET', k, 'lr')[1]) then
  h = {rate = math.max(1000 / ran, LEARN.min), at = NOW, k = 0, limited = false, cut = false, tat = 0, lately = 0, upd = NOW}
  redis.call('HSET', k, 'lh', 1, 'lr', h.rate, 'lp', NOW, 'lk', 0)
end
if answered then
  -- Neither accepted nor refused for the rate (a failure of the job's
  -- own): it tells only that no budget came back.
elseif ok then
  h.k = h.k + 1
  redis.call('HSET', k, 'lk', h.k)
  h.lately, h.upd = accepted(h) * LEARN.recent / 1000 + 1, NOW
  redis.call('HSET', k, 'le', h.lately, 'lu', NOW)
elseif not h.limited or NOW - ran >= h.at then
  -- The first 429, or one that ends a run since the last cut.
  -- What was accepted lately tells the rate once it spans a while since
  -- learning began (or the last cut) and counts a few calls.
  local r, measured = math.max(1000 / ran, LEARN.min), h.lately >= 4 and NOW - h.at >= LEARN.recent
  if h.limited then
    r = learnedRate(h)
  end
  local factor = LEARN.beta
  if h.cut and h.k < LEARN.flat / 2 then
    factor = LEARN.hard
  elseif h.limited and not h.cut then
    -- The end of slow start: the rate grew past the limit while the
    -- provider's bucket paid for it (TCP halves its window there too).
    factor = LEARN.slowEnd
  end
  if measured then
    r = math.min(r, accepted(h))
  end
  local ls = 0
  if measured or h.cut then
    ls = 1
  end
  h = {rate = math.max(r * factor, LEARN.min), at = NOW, k = 0, limited = true, cut = ls == 1, tat = h.tat, lately = h.lately, upd = h.upd}
  -- The learned bucket keeps one call, the probe's: the calls the bucket
  -- gathered meanwhile would all meet the provider's empty one.
  local nr = learnedRate(h)
  h.tat = math.max(h.tat, NOW + (math.max(2, nr * LEARN.burst) - 1) * 1000 / nr)
  redis.call('HSET', k, 'lr', h.rate, 'lp', NOW, 'lk', 0, 'ls', ls, 'lt', h.tat)
end
if redis.call('PTTL', k) < keep then
  redis.call('PEXPIRE', k, keep)
end
return math.floor(learnedRate(h) * 60)
