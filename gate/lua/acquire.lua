-- Acquire a job's lock in one round trip.
-- KEYS[1] lock, KEYS[2] meta, KEYS[3] scope (optional: only when every key
-- lives on one node; on a cluster the scope is read by scope_check.lua).
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] meta TTL ms (lease + AttemptsTTL).
-- Replies:
--   {fence, attempts * 2 + fresh}  the job was Ready and is now Running;
--                                  fresh = 1 when the meta key was created
--   {"b", lockValue, pttl}         refused: the lock's value says the state
--                                  (and, cooling or failed, the attempts)
--   {"s", scopeValue, pttl}        refused: the upstream scope is cooling
if KEYS[3] then
  local s = redis.call('GET', KEYS[3])
  if s then
    return {'s', s, redis.call('PTTL', KEYS[3])}
  end
end
local v = redis.call('GET', KEYS[1])
if v then
  return {'b', v, redis.call('PTTL', KEYS[1])}
end
local m = redis.call('HMGET', KEYS[2], 'a', 'f')
local attempts = tonumber(m[1] or '0') or 0
-- Fencing token: Redis's clock in microseconds, and never below the last one
-- issued, so it keeps increasing when the meta key expired or a failover
-- lost it (the clock then carries it forward).
local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(m[2] or '0') or 0
if fence <= last then
  fence = last + 1
end
redis.call('SET', KEYS[1], 'r:' .. ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'f', string.format('%.0f', fence))
-- The meta key must outlive this lease by AttemptsTTL (renew.lua keeps it
-- so); the lock is gone, so nothing needs it longer than that.
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local fresh = 0
if not m[1] and not m[2] then fresh = 1 end
-- Both are integers below 2^53, exact in a Lua number.
return {fence, attempts * 2 + fresh}
