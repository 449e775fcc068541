-- Ask an upstream for the probe, once its cooldown or pause is
-- over (package upstream). KEYS[1] the upstream's key, holding
-- "<st>:<reason>:<level>:<until>[:<token>]": st c (cooling) or p (paused)
-- until <until>, or h (one call, token, probes until <until>).
-- ARGV[1] token, ARGV[2] lease ms: the probe holds the upstream for one
-- lease; if it dies, the key expires and the upstream is ready.
-- Reply: {1} ready (no key: nothing to claim); {2, level} claimed;
--        {0, value, wait ms} refused.
local v = redis.call('GET', KEYS[1])
if not v then
  return {1}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st, reason, n, untl = string.match(v, '^(%a):([^:]*):(%d+):(%d+)')
if not st then
  return {0, v, redis.call('PTTL', KEYS[1])}
end
local wait = tonumber(untl) - now
if st ~= 'h' and wait <= 0 then
  local lease = tonumber(ARGV[2])
  redis.call('SET', KEYS[1], 'h:' .. reason .. ':' .. n .. ':' .. string.format('%.0f', now + lease) .. ':' .. ARGV[1], 'PX', lease)
  return {2, tonumber(n)}
end
return {0, v, math.max(wait, 0)}
