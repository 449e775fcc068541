-- Read a job's state in one round trip.
-- KEYS[1] lock, KEYS[2] meta, KEYS[3] scope (optional, single node only).
-- Reply: {lockValue or false, pttl, attempts, fence, scopeValue or false, scopePttl}
local m = redis.call('HMGET', KEYS[2], 'a', 'f')
local v = redis.call('GET', KEYS[1])
local pttl = -2
if v then pttl = redis.call('PTTL', KEYS[1]) end
local s, spttl = false, -2
if KEYS[3] then
  s = redis.call('GET', KEYS[3])
  if s then spttl = redis.call('PTTL', KEYS[3]) end
end
return {v, pttl, m[1] or '0', m[2] or '0', s, spttl}
