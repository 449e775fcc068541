-- (scope_lib.lua is prepended when KEYS[3] is given.) Acquire a job's lock in one round trip.
-- KEYS[1] lock, KEYS[2] meta, KEYS[3] scope (optional: only when every key
-- lives on one node; on a cluster the scope is read by scope_check.lua).
-- ARGV[1] token: the lock's value becomes "r:<token>"
-- ARGV[2] lease ms: the lock's TTL
-- ARGV[3] meta TTL ms: lease + AttemptsTTL
-- ARGV[4] slack ms: how far the meta TTL may fall before it is refreshed
-- Reply (decoded by decodeAcquire in protocol.go):
--   {"ok", fence, attempts, fresh, probe}
--                                   the job was Ready and is now Running;
--                                   fresh = 1 when the meta key was created,
--                                   probe = 1 when this call probes the
--                                   scope after its cooldown (scope_lib.lua)
--   {"job", lockValue, pttl}        refused: the lock's value says the state
--   {"scope", scopeValue, pttl}     refused: the upstream scope is cooling
local probe, sreason, slevel = 0
if KEYS[3] then
  local r
  r, sreason, slevel = scope_peek(KEYS[3])
  if r == true then
    probe = 1 -- claimed below, once the job is known to be free
  elseif r then
    return {'scope', r[1], r[2]}
  end
end
local v = redis.call('GET', KEYS[1])
if v then
  return {'job', v, redis.call('PTTL', KEYS[1])}
end
if probe == 1 then
  scope_claim(KEYS[3], sreason, slevel, ARGV[1], ARGV[2])
end
local m = redis.call('HMGET', KEYS[2], 'a', 'f')
local attempts = tonumber(m[1] or '0') or 0
-- Fencing token: Redis's clock in microseconds, and never below the last one
-- issued, so it keeps increasing when the meta key expired or a failover
-- lost it (the clock then carries it forward).
local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(m[2] or '0') or 0
local fs
if fence > last then
  -- The decimal digits straight from TIME: exact, and cheaper than format.
  fs = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
else
  fence = last + 1
  fs = string.format('%.0f', fence)
end
redis.call('SET', KEYS[1], 'r:' .. ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'f', fs)
-- The meta key must outlive this lease by AttemptsTTL; renew.lua extends it
-- with the lease. Refreshing it only once it has used half of AttemptsTTL
-- keeps a PEXPIRE off most acquires.
local fresh = 0
if not m[1] and not m[2] then fresh = 1 end
if fresh == 1 or redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) - tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
-- The fence is below 2^53, exact in a Lua number.
return {'ok', fence, attempts, fresh, probe}
