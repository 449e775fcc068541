-- The probe's call reached the upstream: make it ready for every call.
-- KEYS[1] the upstream's key; ARGV[1] the probe's token.
-- Reply: 1 recovered, 0 not the probe.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local st, _, _, _, token = upstream_parse(v)
if st ~= 'h' or token ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.pcall(PUBLISH, KEYS[1], '')
return 1
