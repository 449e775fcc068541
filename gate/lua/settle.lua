-- (scope_lib.lua is prepended.) Settle a failed lease in one round trip
-- (success and release are release.lua).
-- KEYS[1] lock, KEYS[2] meta; KEYS[3] scope, KEYS[4] scope failures (single
-- node only, when a scope update is requested).
-- ARGV[1] token
-- ARGV[2] op: "t" transient, "p" permanent, "y" systemic, "x" the caller
--             cancelled (cooldown ARGV[5] exactly, no attempt counted)
-- ARGV[3] reason code
-- ARGV[4] server hint ms (0 = none)
-- ARGV[5] cooldown ms, ARGV[6] backoff factor, ARGV[7] jitter multiplier,
-- ARGV[8] max cooldown ms, ARGV[9] max attempts (0 = unlimited),
-- ARGV[10] failed TTL ms, ARGV[11] attempts TTL ms
-- ARGV[12..17] scope update: op, reason, ttl, allowed, window, member
-- ARGV[18] the lease's fence token
-- The lock's value becomes "<state>:<attempts>:<reason>".
-- Reply: {owned (1/0), state, ttl ms, attempts, scopeValue or false, scopePttl}
--   state: "c" cooling or "f" failed; for not owned, the current lock
--   value's state letter or "ready" when there is none.
local scope = {false, 0}
if KEYS[3] and ARGV[12] ~= '' then
  scope = scope_update(KEYS[3], KEYS[4], ARGV[12], ARGV[13], ARGV[14], ARGV[15], ARGV[16], ARGV[17])
end

local cur = redis.call('GET', KEYS[1])
-- A failure is still recorded when the lock expired and nobody acquired the
-- job since (the last fence issued is ours): the failure happened, and
-- dropping it would allow an immediate free retry.
local expiredOurs = (not cur) and redis.call('HGET', KEYS[2], 'f') == ARGV[18]
if cur ~= 'r:' .. ARGV[1] and not expiredOurs then
  local st = 'ready'
  if cur then st = string.sub(cur, 1, 1) end
  return {0, st, redis.call('PTTL', KEYS[1]), 0, scope[1], scope[2]}
end

local function fmt(n) return string.format('%.0f', n) end

local op = ARGV[2]
local reason = ARGV[3]
local attemptsTTL = tonumber(ARGV[11])
local maxCooldown = tonumber(ARGV[8])
local attempts = tonumber(redis.call('HGET', KEYS[2], 'a') or '0') or 0
local state, ttl

if op == 'p' then
  attempts = attempts + 1
  state, ttl = 'f', tonumber(ARGV[10])
elseif op == 't' then
  attempts = attempts + 1
  local maxAttempts = tonumber(ARGV[9])
  if maxAttempts > 0 and attempts >= maxAttempts then
    state, ttl = 'f', tonumber(ARGV[10])
  else
    local backoff = tonumber(ARGV[5]) * tonumber(ARGV[6]) ^ (attempts - 1) * tonumber(ARGV[7])
    if backoff > maxCooldown then backoff = maxCooldown end
    state, ttl = 'c', math.max(tonumber(ARGV[4]), backoff)
  end
elseif op == 'x' then
  state, ttl = 'c', tonumber(ARGV[5])
else -- 'y' systemic: not the job's fault, no attempt counted
  state, ttl = 'c', math.max(tonumber(ARGV[4]), tonumber(ARGV[5]))
end

if state == 'c' and ttl > maxCooldown then ttl = maxCooldown end
ttl = math.max(1, math.floor(ttl))
-- The value carries the attempt count so a refusal needs no second read.
redis.call('SET', KEYS[1], state .. ':' .. attempts .. ':' .. reason, 'PX', fmt(ttl))
if attempts > 0 then
  redis.call('HSET', KEYS[2], 'a', attempts)
end
-- The meta key (attempts, last fence) outlives the lock so the next failure
-- escalates, and is bounded by its own TTL.
redis.call('PEXPIRE', KEYS[2], fmt(ttl + attemptsTTL))
return {1, state, ttl, attempts, scope[1], scope[2]}
