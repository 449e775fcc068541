-- Extend a lease its owner still holds. KEYS[1] the job's key.
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] the lease's fence, ARGV[4] its
-- attempt count. A lease taken on a free key holds "r:<token>" (a plain
-- SET NX, Store.Acquire): its first renewal records the fence and attempts
-- beside it, as a lease taken by job_acquire.lua has them from the start.
-- Reply: 1 extended, 0 not owned.
local t = 'r:' .. ARGV[1]
local v = redis.call('GET', KEYS[1])
if v == t then
  redis.call('SET', KEYS[1], t .. ':' .. ARGV[3] .. ':' .. ARGV[4], 'PX', ARGV[2])
  return 1
end
if v and string.sub(v, 1, #t + 1) == t .. ':' then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
