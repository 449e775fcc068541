-- Ask an upstream for the probe, once its cooldown or pause is over
-- (upstream_may, the judgement package upstream makes too). The claim
-- must run in Redis: of the calls that find the wait over, one probes.
-- KEYS[1] the upstream's key (upstream_value.lua).
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
local st, reason, n, untl = upstream_parse(v)
if not st then
  return {0, v, redis.call('PTTL', KEYS[1])}
end
if upstream_may(v, now) then
  local lease = tonumber(ARGV[2])
  redis.call('SET', KEYS[1], 'h:' .. reason .. ':' .. n .. ':' .. string.format('%.0f', now + lease) .. ':' .. ARGV[1], 'PX', lease)
  return {2, tonumber(n)}
end
return {0, v, math.max(tonumber(untl) - now, 0)}
