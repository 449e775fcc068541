-- Undo an acquire that the upstream scope refused (cluster form, where the
-- scope is read in parallel): the job goes back to exactly what it was.
-- KEYS[1] lock, KEYS[2] meta; ARGV[1] token, ARGV[2] "1" if the acquire
-- created the meta key. Its fence was never handed to fn, so dropping it
-- cannot let a stale writer through.
if redis.call('GET', KEYS[1]) == 'r:' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  notify(KEYS[1], '')
  if ARGV[2] == '1' then
    redis.call('DEL', KEYS[2])
  end
  return 1
end
return 0
