-- Sent right after an acquire's native SET NX (Trip.take), in its round
-- trip: Redis's TIME, which is the fence of a job taken so, and, when the
-- SET took the key (it holds the running value just written), that fence
-- and 0 attempts written beside the token, so Status tells it before the
-- first renewal; the empty last field says no renewal wrote it (values.go). KEYS[1] the job's key; ARGV[1] the running value the SET
-- wrote ("r:<token>"). Reply: TIME's {seconds, microseconds}.
local t = redis.call('TIME')
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. t[1] .. string.rep('0', 6 - #t[2]) .. t[2] .. ':0:', 'KEEPTTL')
end
return t
