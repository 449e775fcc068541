-- Count a member in a sliding window: an upstream's 5xx failures (member:
-- the run's token), or the distinct jobs failing with one permanent reason
-- (member: the job). KEYS[1] the window, a sorted set by time.
-- ARGV[1] member, ARGV[2] window ms. Reply: the members in the window.
-- KEYS[2] (optional) the upstream's key: the reply is then {the members,
-- its value or ''}, read in the same step, so that a pause that clears the
-- window is seen with the count it leaves (a GET beside the script could
-- run before it: a script that Redis does not hold yet is sent again
-- after the rest of its trip).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - tonumber(ARGV[2])))
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
if KEYS[2] then
  return {n, redis.call('GET', KEYS[2]) or ''}
end
return n
