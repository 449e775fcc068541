-- Release a lease with no cooldown: success, or a release (the caller gave
-- up, or the client's request was wrong).
-- KEYS[1] lock, KEYS[2] meta.
-- ARGV[1] token, ARGV[2] done TTL ms ("0" = delete the lock),
-- ARGV[3] "1" to clear the attempt count (success after failures).
-- Reply (settle.lua's shape): {owned (1/0), state, ttl ms, 0, false, 0}
local cur = redis.call('GET', KEYS[1])
if cur ~= 'r:' .. ARGV[1] then
  local st = 'ready'
  if cur then st = string.sub(cur, 1, 1) end
  return {0, st, 0, 0, false, 0}
end
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[2], 'a')
end
if ARGV[2] ~= '0' then
  redis.call('SET', KEYS[1], 'd:', 'PX', ARGV[2])
  return {1, 'd', tonumber(ARGV[2]), 0, false, 0}
end
redis.call('DEL', KEYS[1])
return {1, 'ready', 0, 0, false, 0}
