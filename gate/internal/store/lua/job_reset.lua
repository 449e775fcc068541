-- Operator reset: clear a job's cooldown, failed or done mark and its
-- attempt count. A running lease is left alone (its owner would lose
-- fencing). KEYS[1] the job's key.
-- Reply: {previous value or false, pttl of a running one (else 0), and
-- for a running one Redis's clock in ms (how long its run has taken)}.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'r:' then
  local t = redis.call('TIME')
  return {v, redis.call('PTTL', KEYS[1]), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
end
if v then
  redis.call('DEL', KEYS[1])
  redis.pcall(PUBLISH, KEYS[1], '')
end
return {v or false, 0}
