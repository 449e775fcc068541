-- Give: the budget can serve calls and callers wait in its upstream's
-- line: give each of as many callers as fit a turn, in the line's order
-- (next_turn), reserving its call in the budget as the turn is given
-- (budget_line.lua: the caller's acquire takes the reservation over). A
-- settle that releases a reservation, a join, and a process whose
-- callers wait, when the refill the budget predicts comes, ask for it.
-- KEYS[1..3] the line's keys, KEYS[4] the upstream's key, KEYS[5] its
-- budget, KEYS[6] its calls in flight. ARGV[1] the prefix of the lists of
-- grants, ARGV[2] the line's lease ms, ARGV[3] keep ms, ARGV[4] a
-- reservation's lease ms (the gate's), ARGV[5] the requests kept in
-- reserve, ARGV[6] the share of the token limit kept in reserve, ARGV[7]
-- the process whose timer asks ('' for any other give), ARGV[8] the
-- headroom: the requests kept, beside the reserve, for a higher class
-- while a lower one has the head of the line and the higher asked lately
-- (the line's hash: 'hc' the highest class that joined, 'hu' until when
-- it counts, line_join.lua); then the reservations of turns given and not
-- used, released first.
-- One process's timer gives the refills (the line's hash: 'gw' that
-- process, 'gt' when it is due back, ms): another's is told to come back
-- a second after that, so the refills cost one round trip each, not one
-- per process, and a giver that died is replaced within a second. One
-- whose callers have all left the line stops giving: the next timer to
-- ask gives. 'pt'
-- is until when the probe's turn, given, is its own (ms).
-- Reply: {turns given, wait ms}: the wait until the budget fits one more
-- call while callers still wait (for a timer not the giver, until it
-- looks again); where only a call in flight settling can tell, until the
-- soonest reservation lapses; while the upstream cools or is paused,
-- until that ends; while its probe runs, until its key ends; 0 when none
-- wait.
for i = 9, #ARGV do
  redis.call('ZREM', KEYS[6], ARGV[i])
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  return {0, 0}
end
local now = now_ms()
-- At most this many turns this step.
local most = 100
local uv = redis.call('GET', KEYS[4])
if uv and upstream_may(uv, now) then
  -- Its cooldown or pause is over and no call claimed the probe: one
  -- turn, whose acquire claims it; the probe's settle gives the rest.
  -- (Given none, the line waited for a call from outside it to probe,
  -- up to the key's grace: a lease.) A give before that acquire lands (a
  -- join's, a settle's) gives none: a second turn would meet the probe
  -- and be refused. Its taker gone, the next is given one a second on.
  local pt = tonumber(redis.call('HGET', KEYS[3], 'pt') or '0')
  if pt > now then
    return {0, pt - now}
  end
  most = 1
elseif uv then
  -- Cooling, paused or probed: the probe's settle gives the turns. A
  -- timer looks again when the wait ends, or the key (a probe's, or a
  -- value of another shape), not as soon as for a join not landed (a key
  -- without a TTL, which the gate never writes: a line's lease later).
  local st, _, _, untl = upstream_parse(uv)
  local held
  if st == 'c' or st == 'p' then
    held = tonumber(untl) - now
  else
    held = redis.call('PTTL', KEYS[4])
    if held < 0 then
      held = tonumber(ARGV[2])
    end
  end
  return {0, math.max(held, 1)}
end
local timer = ARGV[7]
if timer ~= '' then
  local gv = redis.call('HMGET', KEYS[3], 'gw', 'gt')
  if gv[1] and gv[1] ~= timer and tonumber(gv[2]) > now and redis.call('SCARD', KEYS[2] .. ':' .. gv[1]) > 0 then
    return {0, tonumber(gv[2]) - now + 1000}
  end
end
reap(now, 256)
-- The refusals' turns (qn) are not this step's: what fits is asked as if
-- none had been told.
local qn = redis.call('HGET', KEYS[5], 'qn')
redis.call('HDEL', KEYS[5], 'qn')
local reserve, share, lease = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[4])
local room = tonumber(ARGV[8])
local hv = redis.call('HMGET', KEYS[3], 'hc', 'hu')
local hc, hu = tonumber(hv[1] or '-1'), tonumber(hv[2] or '0')
local out, lists, skip, wait = 0, {}, {n = 0}, 0
-- A class's call fits while the budget keeps its reserve, and the
-- headroom too while a higher class asked lately: that class's next
-- caller finds the room at once instead of waiting a refill behind the
-- lower class's turns. Once none asked for a while, the lower class takes
-- everything.
local function fits(c)
  local kept = reserve
  if c < hc and hu > now then
    kept = reserve + room
  end
  local a = admit(KEYS[5], KEYS[6], 0, kept, share)
  if a[1] == 2 then
    wait = a[2]
    return false
  elseif a[1] == 3 then
    -- Only a settle can tell, or the lapse of the soonest reservation
    -- (its process died holding it: nothing settles, and nothing else
    -- wakes the line then).
    local r = redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. NOW, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if r[2] then
      wait = tonumber(r[2]) - NOW + 1
    end
    return false
  end
  return true
end
-- A budget that lapsed judges nothing: at most 100 turns a step then.
while out < most do
  local m, owner = next_turn(now, skip, fits, ARGV[3])
  if not m then
    break
  end
  redis.call('ZADD', KEYS[6], NOW + lease, turn_member(m))
  if redis.call('PTTL', KEYS[6]) < lease then
    redis.call('PEXPIRE', KEYS[6], lease)
  end
  grant(ARGV[1], m, owner, lists)
  out = out + 1
end
if most == 1 and out == 1 then
  redis.call('HSET', KEYS[3], 'pt', int(now + 1000))
  wait = 1000
end
if qn then
  redis.call('HSET', KEYS[5], 'qn', qn)
end
publish(lists, ARGV[2])
if redis.call('EXISTS', KEYS[3]) == 1 then
  keep(ARGV[3])
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  wait = 0
end
if timer ~= '' then
  if wait > 0 then
    -- Due back when the next call fits.
    redis.call('HSET', KEYS[3], 'gw', timer, 'gt', int(now + wait + 200))
  else
    -- Nobody waits, or only a settle can tell: the next timer to ask
    -- gives (a join asks at once).
    redis.call('HDEL', KEYS[3], 'gw', 'gt')
  end
end
return {out, wait}
