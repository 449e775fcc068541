-- Operator reset: clear a job's cooldown, failed or done mark and its
-- attempt count. A running lease is left alone (its owner would lose
-- fencing). KEYS[1] the job's key.
-- Reply: {previous value or false, pttl of a running one (else 0)}.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'r:' then
  return {v, redis.call('PTTL', KEYS[1])}
end
if v then
  redis.call('DEL', KEYS[1])
  redis.pcall(PUBLISH, KEYS[1], '')
end
return {v or false, 0}
