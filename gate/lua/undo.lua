-- Undo an acquire that was refused after the fact: the upstream scope read
-- in parallel (cluster form) was cooling, or WaitReplicas was not met.
-- KEYS[1] lock; ARGV[1] the lease's lock value, ARGV[2] the ready mark to
-- put back ("" when the lock was absent: delete it), ARGV[3] its TTL ms.
-- The acquire wrote nothing else, and its fence was never handed to fn, so
-- dropping it cannot let a stale writer through.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  end
  return 1
end
return 0
