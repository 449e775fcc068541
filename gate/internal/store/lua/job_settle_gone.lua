-- Record the failure of a run whose key was gone when it settled
-- (job_settle.lua found nothing): its lease ended in Redis before the
-- failure reached it. Dropping the failure would make the next call an
-- immediate free retry, so it is written (job_write.lua), unless the key
-- holds a value again or a newer run's success left its fence in the done
-- key since (Trip.MarkDone), or an operator's reset left its time there
-- (":<µs>", Trip.ForgetDone): a run whose lease ended never overwrites
-- what a newer run or an operator decided. (A newer run whose lease ended
-- too decided nothing: nothing of it is left to tell, as of a crashed
-- holder, and the failure is written.) The done key remembers for
-- SuccessMemory only, so past ARGV[7] (when the lease ended, by Redis's
-- clock, plus SuccessMemory: the last instant the done key still holds
-- whatever happened since) the failure is not written: the lease's own
-- TTL was its cooldown.
-- KEYS[1] the job's key, KEYS[2] its done key ("<token>:<fence>").
-- ARGV[1] to ARGV[5] as job_settle.lua, ARGV[6] the run's fence, ARGV[7]
-- the µs (Redis TIME) after which the failure is stale.
-- Reply: {1} written; {0, the value found or false} not written.
local now = redis.call('TIME')
if tonumber(now[1]) * 1000000 + tonumber(now[2]) > tonumber(ARGV[7]) then
  return {0, false}
end
local cur = redis.call('GET', KEYS[1])
if cur then
  return {0, cur}
end
local done = redis.call('GET', KEYS[2])
local fence = done and string.match(done, ':(%d+)$')
if fence and tonumber(fence) > tonumber(ARGV[6]) then
  return {0, false}
end
return write(KEYS[1])
