-- Give back a job taken by an acquire that cannot run after all (its
-- upstreams refused it, too few replicas acknowledged it, or a waiter
-- found the run it waited for done): the job's value goes back to what
-- the acquire found. Its fence was never handed to fn, so dropping it lets
-- no stale writer through.
-- KEYS[1] the job's key; ARGV[1] token, ARGV[2] the previous value ('' =
-- none), ARGV[3] its pttl ms. Reply: 1 given back, 0 not owned.
local t = 'r:' .. ARGV[1]
local v = redis.call('GET', KEYS[1])
if not v or (v ~= t and string.sub(v, 1, #t + 1) ~= t .. ':') then
  return 0
end
if ARGV[2] == '' or tonumber(ARGV[3]) <= 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
redis.pcall(PUBLISH, KEYS[1], ARGV[2])
return 1
