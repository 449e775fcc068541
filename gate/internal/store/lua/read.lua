-- Read a job's or an upstream's value with Redis's clock, in which the
-- <until> they hold is written. KEYS[1] the key.
-- Reply: {value or false, pttl, now ms}.
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local pttl = -2
if v then pttl = redis.call('PTTL', KEYS[1]) end
return {v or false, pttl, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
