-- Acquire a job's lock in one round trip.
-- KEYS[1] lock, KEYS[2] meta, KEYS[3] scope (optional: only when every key
-- lives on one node; on a cluster the scope is read by scope_check.lua).
-- ARGV[1] token, ARGV[2] lease ms.
-- Replies:
--   {fence, attempts * 2 + z}  the job was Ready and is now Running; z = 1
--                              when the lock held a ready mark ("z:...")
--   {"b", lockValue, pttl}     refused: the lock's value says the state
--                              (and, cooling or failed, the attempts)
--   {"s", scopeValue, pttl}    refused: the upstream scope is cooling
-- The lock's value becomes "r:<token>:<fence>:<attempts>".
if KEYS[3] then
  local s = redis.call('GET', KEYS[3])
  if s then
    return {'s', s, redis.call('PTTL', KEYS[3])}
  end
end
local v = redis.call('GET', KEYS[1])
local last, attempts, z = 0, 0, 0
if v then
  -- "z:<fence>[:<attempts>]" is a ready job that remembers its last fence
  -- and attempt count (a success, a release or a reset wrote it); every
  -- other value is a refusal.
  local f, a = string.match(v, '^z:(%d+):?(%d*)$')
  if not f then
    return {'b', v, redis.call('PTTL', KEYS[1])}
  end
  last, attempts, z = tonumber(f), tonumber(a) or 0, 1
else
  -- No lock: the meta key, written by the last failure, keeps the attempt
  -- count and the last fence past the cooldown.
  local m = redis.call('HMGET', KEYS[2], 'a', 'f')
  attempts = tonumber(m[1] or '0') or 0
  last = tonumber(m[2] or '0') or 0
end
-- Fencing token: Redis's clock in microseconds, and never below the last one
-- issued, so it keeps increasing when the clock steps back; when a failover
-- or a restart lost the last one, the clock carries it forward.
local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fs
if fence > last then
  -- The decimal digits straight from TIME: exact, and cheaper than format.
  fs = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
else
  fence = last + 1
  fs = string.format('%.0f', fence)
end
redis.call('SET', KEYS[1], 'r:' .. ARGV[1] .. ':' .. fs .. ':' .. attempts, 'PX', ARGV[2])
-- Both are integers below 2^53, exact in a Lua number.
return {fence, attempts * 2 + z}
