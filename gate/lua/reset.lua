-- Operator reset: clear a cooldown, failed or done mark and the attempt
-- count. A running lease is left alone (its owner would lose fencing).
-- KEYS[1] lock, KEYS[2] meta; ARGV[1] AttemptsTTL ms.
-- The lock becomes a ready mark "z:<last fence>" when the last fence is
-- known, so fences keep increasing and a late settle of an expired lease
-- cannot put the cooldown back.
-- Reply: {previous lock value or false, its pttl when running else 0}.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'r:' then
  return {v, redis.call('PTTL', KEYS[1])}
end
local last = 0
if v then last = tonumber(string.match(v, '^[zd]:(%d+)') or '0') or 0 end
if last == 0 then last = tonumber(redis.call('HGET', KEYS[2], 'f') or '0') or 0 end
if last > 0 then
  redis.call('SET', KEYS[1], 'z:' .. string.format('%.0f', last), 'PX', ARGV[1])
elseif v then
  redis.call('DEL', KEYS[1])
end
redis.call('DEL', KEYS[2])
return {v, 0}
