-- Place: how many turns come before ARGV[1]'s, and how many wait in all.
-- Reply: {ahead, waiting}; ahead is -1 when ARGV[1] is not in the line.
reap(now_ms(), 64)
local n = redis.call('ZCARD', KEYS[1])
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {-1, n}
end
return {redis.call('ZRANK', KEYS[1], ARGV[1]), n}
