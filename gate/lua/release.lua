-- Release a lease with no cooldown: success, or a release (the caller gave
-- up, or the client's request was wrong).
-- KEYS[1] lock, KEYS[2] meta.
-- ARGV[1] the lease's lock value, ARGV[2] the value to leave: "z:<fence>"
-- or "z:<fence>:<attempts>" (ready) or "d:<fence>" (done), ARGV[3] its TTL
-- ms, ARGV[4] "1" to delete the meta key (the lease started with attempts,
-- which the new value now carries or clears).
-- The lock is not deleted: the ready mark keeps the last fence (so the next
-- one needs no other key) and tells a late settle of an expired lease that
-- the job has moved on.
-- Reply: 1 released, 0 not owned (nothing written).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[2])
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
