-- Cool or pause an upstream for a provider-wide failure. A stop never
-- shortens a longer wait, a cooldown never replaces a pause, and a call
-- that is not the probe never ends another's probe; the probe's own
-- failure stops it again one level up (Go escalates its ttl by that level).
-- KEYS[1] the upstream's key; KEYS[2] (optional) a failure window that the
-- stop clears.
-- ARGV[1] c (cool) or p (pause), ARGV[2] the settling run's token,
-- ARGV[3] reason, ARGV[4] ttl ms, ARGV[5] grace ms: the key outlives
-- <until> by it, so the first call after the wait claims the probe.
-- Reply: {value, wait ms, 1} stopped; {value or false, wait ms, 0} kept.
local cur = redis.call('GET', KEYS[1])
local st, n, untl, token
if cur then
  local reason
  st, reason, n, untl, token = upstream_parse(cur)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
local probe = st == 'h' and token == ARGV[2]
if cur and not probe then
  if not st then
    return {cur, redis.call('PTTL', KEYS[1]), 0}
  end
  local wait = tonumber(untl) - now
  if st == 'h' or wait >= ttl or (ARGV[1] == 'c' and st == 'p') then
    return {cur, math.max(wait, 0), 0}
  end
end
local level = 1
if probe then
  level = tonumber(n) + 1
elseif st then
  level = tonumber(n)
end
local v = ARGV[1] .. ':' .. ARGV[3] .. ':' .. level .. ':' .. string.format('%.0f', now + ttl)
redis.call('SET', KEYS[1], v, 'PX', string.format('%.0f', ttl + tonumber(ARGV[5])))
redis.pcall(PUBLISH, KEYS[1], v)
if KEYS[2] then
  redis.call('DEL', KEYS[2])
end
return {v, ttl, 1}
