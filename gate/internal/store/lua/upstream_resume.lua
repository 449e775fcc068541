-- End an operator's pause of an upstream (upstream_pause.lua), and only
-- that: a cooldown or pause the provider caused is left to
-- upstream_reset.lua. KEYS[1] the upstream's key; ARGV[1] the operator's
-- reason code. Reply: 1 ended, 0 no operator's pause.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 3) ~= 'p:' .. ARGV[1] .. ':' then
  return 0
end
redis.call('DEL', KEYS[1])
redis.pcall(PUBLISH, KEYS[1], '')
return 1
