-- (scope_lib.lua is prepended.) Record a failed lease in one round trip
-- (success and release are release.lua). The Go side (protocol.go) decides
-- the new state, TTL and attempt count from the verdict, the options and the
-- attempt count the acquire read; this script only checks ownership and
-- writes, so every rule about cooldowns lives in one place, in Go.
-- KEYS[1] lock, KEYS[2] meta; KEYS[3] scope, KEYS[4] scope failures (single
-- node only, when a scope update is requested).
-- ARGV[1] token: the lease owns the lock while it holds "r:<token>"; also
--         this failure's member in the scope's failure window
-- ARGV[2] fence: the lease's fencing token
-- ARGV[3] value: the lock's new value, "<c|f>:<attempts>:<reason>:<fence>"
-- ARGV[4] ttl ms: the cooldown, or how long a failed mark is kept
-- ARGV[5] attempts to store in the meta key ("" = leave the count as is)
-- ARGV[6] meta TTL ms: ttl + AttemptsTTL, so the next failure escalates
-- ARGV[7..14] scope update (with KEYS[3]): op, reason, ttl ms, factor,
--         max ms, grace ms, allowed failures, window ms (scope_lib.lua)
-- Reply: {owned 1|0, the lock's value when not owned (or false),
--         scope value or false, scope wait ms}
local scope = {false, 0}
if KEYS[3] and ARGV[7] ~= '' then
  scope = scope_update(KEYS[3], KEYS[4], ARGV[7], ARGV[8], ARGV[1], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14])
end

local cur = redis.call('GET', KEYS[1])
-- A failure is still recorded when the lock expired and nobody acquired the
-- job since (the last fence issued is ours): the failure happened, and
-- dropping it would allow an immediate free retry.
if cur ~= 'r:' .. ARGV[1] and not ((not cur) and redis.call('HGET', KEYS[2], 'f') == ARGV[2]) then
  return {0, cur, scope[1], scope[2]}
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
notify(KEYS[1], ARGV[3])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[2], 'a', ARGV[5])
end
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {1, false, scope[1], scope[2]}
