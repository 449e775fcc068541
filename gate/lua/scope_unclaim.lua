-- Give a claimed probe back (cluster form: the job's acquire was refused
-- after the scope check had claimed it), so the next call probes at once.
-- KEYS[1] scope; ARGV[1] the claiming token, ARGV[2] grace ms.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local st, reason, n, x = string.match(v, '^(%a):([^:]*):(%d+):(.*)$')
if st ~= 'h' or x ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], 'c:' .. reason .. ':' .. n .. ':0', 'PX', ARGV[2])
notify(KEYS[1], 'c:' .. reason)
return 1
