-- An operator's pause of an upstream: every call refused until it ends by
-- itself (the key expires with the pause, so no probe follows it) or
-- upstream_resume.lua ends it. It replaces whatever the upstream held.
-- KEYS[1] the upstream's key; ARGV[1] reason code, ARGV[2] the operator's
-- note (no control bytes, bounded by Go), ARGV[3] ttl ms.
-- Reply: the value written.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local v = 'p:' .. ARGV[1] .. ':1:' .. string.format('%.0f', now + ttl) .. ':' .. ARGV[2]
redis.call('SET', KEYS[1], v, 'PX', string.format('%.0f', ttl))
redis.pcall(PUBLISH, KEYS[1], v)
return v
