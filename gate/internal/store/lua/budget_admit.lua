-- Admit a call by its upstream's budget, in the acquire's round trip.
-- ARGV[1] the member that reserves the call ("<token>:<tokens>"; "" to
-- judge only), ARGV[2] lease ms (a reservation lapses after it),
-- ARGV[3] the tokens the call will spend (0: not said), ARGV[4] the
-- requests kept in reserve, ARGV[5] the share of the token limit kept in
-- reserve for a call that does not say its tokens. A call is admitted while, with the calls in flight and itself
-- taken, at least the reserve would be left of each limit.
-- A call is judged but not reserved while the upstream's key holds a
-- cooldown, pause or probe: the breaker refuses it, or it claims the
-- probe, which the budget must admit too.
-- Reply: {0} nothing to judge (no budget);
-- {1, 1 reserved / 0, requests left, tokens left} admitted;
-- {2, wait ms, requests left, tokens left} refused until the estimate
-- fits; {3, 0, requests left, tokens left} refused until a call in
-- flight settles (its reading tells more). Left counts are what the
-- estimate leaves after the calls in flight, -1 when not reported.
local member = ARGV[1]
if redis.call('GET', KEYS[1]) then
  member = ''
end
local b = budget()
if not b.r and not b.t then
  return {0}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', NOW)
local n, spent = calls()
local need = {r = 1, t = tonumber(ARGV[3])}
local held = {r = n, t = spent}
local out = {r = -1, t = -1}
local wait, settles = 0, false
for _, p in ipairs(KINDS) do
  local q = b[p]
  if q then
    local l = left(q)
    local reserve = tonumber(ARGV[4])
    if p == 't' then
      -- A call that says its tokens reserves them; one that does not is
      -- judged by a share of the limit standing in for them.
      reserve = 0
      if need.t == 0 then
        reserve = math.floor(q.lim * tonumber(ARGV[5]))
      end
    end
    if l then
      out[p] = math.max(l - held[p], 0)
    end
    if not l or l - held[p] - need[p] < reserve then
      local want = held[p] + need[p] + reserve
      if l and refills(q) and want <= q.lim then
        -- The refill of what is missing, rounded up, never past the reset.
        local w = math.ceil((want - level(q)) * (q.rst - q.at) / (q.lim - q.rem))
        wait = math.max(wait, math.min(w, q.rst - NOW), 1)
      elseif l and q.rst > NOW then
        wait = math.max(wait, q.rst - NOW)
      elseif n > 0 then
        settles = true
      end
      -- Else nothing is in flight and no refill is known: one call finds
      -- out, as a probe does.
    end
  end
end
if settles then
  return {3, 0, out.r, out.t}
end
if wait > 0 then
  return {2, wait, out.r, out.t}
end
if member == '' then
  return {1, 0, out.r, out.t}
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], NOW + lease, member)
redis.call('PEXPIRE', KEYS[3], lease)
for p, x in pairs(out) do
  if x >= 0 then
    out[p] = math.max(x - need[p], 0)
  end
end
return {1, 1, out.r, out.t}
