-- Place: how many turns come before ARGV[1]'s, and how many wait in all.
-- Reply: {ahead, waiting}; ahead is -1 when ARGV[1] is not in the line.
reap(now_ms(), 256)
local n = redis.call('ZCARD', KEYS[1])
local r = redis.call('ZRANK', KEYS[1], ARGV[1])
if not r then
  return {-1, n}
end
return {r, n}
