-- Operator reset: clear a cooldown, failed or done mark and the attempt
-- count. A running lease is left alone (its owner would lose fencing).
-- KEYS[1] lock, KEYS[2] meta. Reply: the previous lock value or false.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'r:' then
  return {v, redis.call('PTTL', KEYS[1])}
end
if v then redis.call('DEL', KEYS[1]) end
redis.call('HDEL', KEYS[2], 'a')
notify(KEYS[1], '')
return {v, 0}
