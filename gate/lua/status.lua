-- (scope_lib.lua is prepended when KEYS[3] is given.) Read a job's state in one round trip.
-- KEYS[1] lock, KEYS[2] meta, KEYS[3] scope (optional, single node only).
-- Reply: {lockValue or false, pttl, attempts, fence, scopeValue or false,
-- scope wait ms}; the scope reads as open (false) once its wait is over.
local m = redis.call('HMGET', KEYS[2], 'a', 'f')
local v = redis.call('GET', KEYS[1])
local pttl = -2
if v then pttl = redis.call('PTTL', KEYS[1]) end
local s = {false, 0}
if KEYS[3] then
  local r = scope_peek(KEYS[3])
  if r and r ~= true then s = r end
end
return {v, pttl, m[1] or '0', m[2] or '0', s[1], s[2]}
