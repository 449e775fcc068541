-- Record a run's outcome (job_write.lua): one write, checked for
-- ownership. KEYS[1] the job's key. (A success also leaves its token and
-- fence in the job's done key, by a SET sent beside this script: job.go.)
-- ARGV[1] token: the run owns the job while it holds "r:<token>[:...]"
-- ARGV[2] to ARGV[5]: the outcome (job_write.lua)
-- ARGV[6] "1": a success written late, by the retry of a settle Redis did
--         not take (the job is done whoever took it since; a newer value
--         is still never overwritten)
-- A success written late is written on a key that is gone too (it expired
-- while Redis was away). Otherwise a run that finds its key gone does not
-- own it: its lease ended, and another run may have taken the job and
-- ended since. A failure then goes on to job_settle_gone.lua.
-- A success outdates a cooling or failed mark of an older fence: an older
-- run's failure, written after this run's lease ended too
-- (job_settle_gone.lua). Nothing newer than this run is in it.
-- Reply: {1} written; {0, the value found or false} not owned.
local t = 'r:' .. ARGV[1]
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= t and string.sub(cur, 1, #t + 1) ~= t .. ':' then
  local older = string.match(cur, '^[cf]:%d+:(%d+):')
  if not (ARGV[2] == 'd' and older and tonumber(older) < tonumber(string.match(ARGV[5], '^(%d+)'))) then
    return {0, cur}
  end
end
if not cur and not (ARGV[2] == 'd' and ARGV[6] == '1' and tonumber(ARGV[3]) > 0) then
  return {0, false}
end
return write(KEYS[1])
