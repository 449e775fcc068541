-- Record the failure of a run whose key was gone when it settled
-- (job_settle.lua found nothing): its lease ended in Redis before the
-- failure reached it. Dropping the failure would make the next call an
-- immediate free retry, so it is written (job_write.lua), unless the key
-- holds a value again or a newer run's success left its fence in the done
-- key since (Trip.MarkDone): a run whose lease ended never overwrites what
-- a newer run decided.
-- KEYS[1] the job's key, KEYS[2] its done key ("<token>:<fence>").
-- ARGV[1] to ARGV[5] as job_settle.lua, ARGV[6] the run's fence.
-- Reply: {1} written; {0, the value found or false} not written.
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
