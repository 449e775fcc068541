-- Count a member in a sliding window: an upstream's 5xx failures (member:
-- the run's token), or the distinct jobs failing with one permanent reason
-- (member: the job). KEYS[1] the window, a sorted set by time.
-- ARGV[1] member, ARGV[2] window ms. Reply: the members in the window.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - tonumber(ARGV[2])))
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
