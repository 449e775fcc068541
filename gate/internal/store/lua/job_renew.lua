-- Extend a lease its owner still holds. KEYS[1] the job's key.
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] the lease's fence, ARGV[4] its
-- attempt count, ARGV[5] the runner's estimate of its call's duration in
-- ms ('' for none). A lease taken on a free key holds "r:<token>" (a plain
-- SET NX, Store.Acquire): a renewal records the fence, attempts and
-- estimate beside it, as a lease taken by job_acquire.lua has the first
-- two from the start.
-- Reply: 1 extended, 0 not owned.
local t = 'r:' .. ARGV[1]
local v = redis.call('GET', KEYS[1])
if v == t or (v and string.sub(v, 1, #t + 1) == t .. ':') then
  local nv = t .. ':' .. ARGV[3] .. ':' .. ARGV[4]
  if ARGV[5] ~= '' then nv = nv .. ':' .. ARGV[5] end
  redis.call('SET', KEYS[1], nv, 'PX', ARGV[2])
  return 1
end
return 0
