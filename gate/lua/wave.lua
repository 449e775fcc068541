-- (scope_lib.lua is prepended.) A wave of permanent failures: the same
-- permanent reason from many distinct jobs of one scope in a short window
-- is not the jobs' fault (a changed API, a broken prompt template, a
-- billing error nobody classified). On the scope's own slot.
-- KEYS[1] scope, KEYS[2] the reason's window (a sorted set of jobs).
-- ARGV[1] reason, ARGV[2] job, ARGV[3] jobs that make a wave,
-- ARGV[4] window ms, ARGV[5] pause ms, ARGV[6] grace ms.
-- Reply: 0 no wave; 1 the failure is part of a wave (the job must cool,
-- not fail; the scope is paused for the reason); 2 it started the wave.
local cur = redis.call('GET', KEYS[1])
if cur then
  local st, reason = scope_parse(cur)
  if st and st ~= 'c' and reason == ARGV[1] then
    return 1 -- the scope is paused (or probing) for this very reason
  end
end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', fmt(now - tonumber(ARGV[4])))
redis.call('ZADD', KEYS[2], fmt(now), ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
if redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[3]) then
  return 0
end
redis.call('DEL', KEYS[2])
local ttl = tonumber(ARGV[5])
redis.call('SET', KEYS[1], 'p:' .. ARGV[1] .. ':1:' .. fmt(now + ttl), 'PX', fmt(ttl + tonumber(ARGV[6])))
notify(KEYS[1], 'p:' .. ARGV[1])
return 2
