-- Place of a job: where the caller of a job waits in the line, from any
-- process. KEYS[1..3] the line's keys, KEYS[4] the job's mark in the line
-- (the member its caller holds, written by line_join.lua until its
-- deadline), KEYS[5] the upstream's budget.
-- Reply: {ahead, waiting, gap ms}; ahead is -1 when the job's caller does
-- not wait; gap is one call's refill (0: not known).
local m = redis.call('GET', KEYS[4])
local n = redis.call('ZCARD', KEYS[1])
if not m then
  return {-1, n, 0}
end
local r = redis.call('ZRANK', KEYS[1], m)
if not r then
  return {-1, n, 0}
end
return {r, n, gap(budget(KEYS[5]))}
