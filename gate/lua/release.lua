-- Release a lease with no cooldown: success, or a release (the caller gave
-- up, or the client's request was wrong).
-- KEYS[1] lock, KEYS[2] meta.
-- ARGV[1] token, ARGV[2] done TTL ms ("0" = delete the lock),
-- ARGV[3] "1" to clear the attempt count (success after failures).
-- Reply: 1 released, 2 held as done, 0 not owned (nothing written).
if redis.call('GET', KEYS[1]) ~= 'r:' .. ARGV[1] then
  return 0
end
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[2], 'a')
end
if ARGV[2] ~= '0' then
  redis.call('SET', KEYS[1], 'd:', 'PX', ARGV[2])
  notify(KEYS[1], 'd:')
  return 2
end
redis.call('DEL', KEYS[1])
notify(KEYS[1], '')
return 1
