-- Give a claimed probe back (its call did not reach the upstream, or its
-- job could not run), so the next call probes at once.
-- KEYS[1] the upstream's key; ARGV[1] the claiming token, ARGV[2] grace ms.
-- Reply: 1 given back, 0 not the probe.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local st, reason, n, _, token = upstream_parse(v)
if st ~= 'h' or token ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local c = 'c:' .. reason .. ':' .. n .. ':' .. (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('SET', KEYS[1], c, 'PX', ARGV[2])
redis.pcall(PUBLISH, KEYS[1], c)
return 1
