-- (Prepended to the scripts that admit calls, after budget_left.lua.)
-- admit judges one more call by the budget at bk whose calls in flight
-- are ck: tokens the call will spend (0: not said), reserve the requests
-- kept in reserve, share the share of the token limit kept in reserve for
-- a call that does not say its tokens. A call is admitted while, with the
-- calls in flight and itself taken, at least the reserve would be left of
-- each limit. It returns the reply the admission scripts give (their
-- header) and what the call needs, for reserve. b is the budget at bk
-- when the caller read it already (budget_left.lua's budget).
-- A refused call is told its own turn, not the moment one call fits: the
-- refusals queue one call's refill apart (a request's, or the tokens it
-- said, whichever refills slower) (the budget's field qn, the last turn
-- given, in Redis ms, as GCRA keeps a theoretical arrival time; qv, the
-- learned rate that told it), so callers that obey their waits come back
-- one at a time instead of all at once when the first call fits.
-- With no reading, the rate learned of a provider that sends none stands
-- for the requests limit once a 429 told it has one (budget_learned.lua);
-- with neither reading nor word that it sends none, calls go one at a
-- time (first).
local function admit(bk, ck, tokens, reserve, share, b)
  b = b or budget(bk)
  local lh
  if not b.r and not b.t then
    lh = learned(bk)
    if not lh then
      return first(ck, tokens)
    end
    if not lh.limited then
      -- It sends no budget and has refused nothing yet: no limit known,
      -- only the calls in flight are bounded.
      return unlimited(bk, ck, lh, tokens)
    end
  end
  -- (Read only: an acquire's script writes nothing before it takes the
  -- job, so that Redis's maxmemory refuses the take; a script that wrote
  -- once may write past maxmemory. Lapsed calls go at the settle.)
  local n, spent, un = 0, 0, 0
  if b.t then
    n, spent, un = calls(ck)
  else
    -- Only the token limit counts the calls' tokens.
    n = inflight(ck)
  end
  -- A call that does not say its tokens costs what calls were learned to
  -- cost (budget_cost.lua), and so do those in flight that did not say.
  local learned, spread, u = nil, 0, 0
  if tokens == 0 and b.t then
    u = un
    learned, spread = cost(bk, u + 1)
  end
  local need = {r = 1, t = tokens}
  if lh then
    local rate, tat, climbing
    b.r, rate, tat, climbing = learnedQuota(lh, n, reserve)
    need.learn = {k = bk, rate = rate, tat = tat, cut = lh.cut, climbing = climbing}
  end
  local held = {r = n, t = spent}
  if learned then
    need.t = math.ceil(learned)
    held.t = spent + u * need.t
  end
  local out = {r = -1, t = -1}
  local wait, settles, gap, whole = 0, false, 0, 0
  for _, p in ipairs(KINDS) do
    local q = b[p]
    if q and p == 'r' and refills(q) then
      -- One request's refill: the turns' gap whichever limit refuses.
      gap = math.max(gap, math.ceil((q.rst - q.at) / (q.lim - q.rem)))
    end
    if q then
      local l = left(q)
      local keep = reserve
      if p == 't' then
        -- A call that says its tokens reserves them; one that does not is
        -- judged by a share of the limit standing in for them.
        keep = 0
        if need.t == 0 and not learned then
          keep = math.floor(q.lim * share)
        elseif learned then
          -- Room for a call larger than the mean; and the share kept
          -- before still holds over the undeclared calls, this one and
          -- those in flight (where calls are small beside the limit, the
          -- share is the larger); never most of the limit.
          local shared = math.floor(q.lim * share) - (held.t - spent) - need.t
          keep = math.min(math.max(spread, shared), math.floor(q.lim / 4))
        end
      end
      if l then
        out[p] = math.max(l - held[p], 0)
      end
      if not l or l - held[p] - need[p] < keep then
        local want = held[p] + need[p] + keep
        if l and refills(q) and want <= q.lim then
          -- The refill of what is missing, rounded up, never past the reset.
          local w = math.ceil((want - level(q)) * (q.rst - q.at) / (q.lim - q.rem))
          wait = math.max(wait, math.min(w, q.rst - NOW), 1)
          whole = math.max(whole, q.rst)
          if p == 't' then
            -- The call's tokens refill in this much (not said: the
            -- requests' gap above stands in; a learned cost is a mean,
            -- and turns spaced exactly at it lose what a caller late to
            -- its turn leaves unspent: 0.90 × the limit where the
            -- requests' gap kept 0.95).
            gap = math.max(gap, math.ceil(tokens * (q.rst - q.at) / (q.lim - q.rem)))
          end
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
  local s = short(bk, tokens)
  if s and need.t >= s.size then
    -- A 429 said a call of this size fits in a moment: the refused call's
    -- own wait, which the others queue behind, one call's refill apart.
    wait = math.max(wait, s.untl - NOW)
    for _, p in ipairs(KINDS) do
      local q = b[p]
      if q and refills(q) then
        -- The turns may run to when the limits are whole again.
        whole = math.max(whole, q.rst)
        if p == 't' then
          gap = math.max(gap, math.ceil(tokens * (q.rst - q.at) / (q.lim - q.rem)))
        end
      end
    end
    whole = math.max(whole, s.untl)
    settles = false
  end
  local q = b.t
  if gap == 0 and learned and q and refills(q) then
    -- No request limit to space the turns: a call's learned cost does.
    gap = math.ceil(need.t * (q.rst - q.at) / (q.lim - q.rem))
  end
  if settles then
    return {3, 0, out.r, out.t, 0, learnt(need)}
  end
  if wait > 0 then
    if gap > 0 then
      local q = redis.call('HMGET', bk, 'qn', 'qv')
      local qn = tonumber(q[1]) or 0
      if need.learn then
        -- A learned rate: the turns told run as far as the queue, which
        -- is counted in calls at the rate that told them (qv) and timed
        -- at the rate now (learnedTurns).
        qn, whole, gap = learnedTurns(qn, tonumber(q[2]), need.learn.rate, gap, need.learn.climbing)
      end
      local turn = math.max(NOW + wait, qn + gap)
      -- Never past the moment the limits are whole again (at most
      -- classify.MaxHint away): then each limit holds as many calls as
      -- it has room for, and the turns start over.
      turn = math.min(turn, math.max(NOW + wait, whole))
      if need.learn then
        redis.call('HSET', bk, 'qn', turn, 'qv', need.learn.rate)
      else
        redis.call('HSET', bk, 'qn', turn)
      end
      wait = turn - NOW
    end
    return {2, wait, out.r, out.t, 0, learnt(need)}
  end
  return {1, 0, out.r, out.t, 0, learnt(need)}, need
end

-- reserve reserves an admitted call (a, need: admit's answer) for member
-- in ck for one lease (ms), and makes a's counts what is left after it.
-- The calls' key outlives each reservation in it: it is given two leases
-- whenever less than one is left, so while calls are in flight its TTL
-- is set once a lease, not at every call, and never falls below the
-- lease of the newest reservation.
local function reserve(a, need, ck, member, lease)
  redis.call('ZADD', ck, NOW + lease, member)
  if redis.call('PTTL', ck) < lease then
    redis.call('PEXPIRE', ck, 2 * lease)
  end
  a[2] = 1
  if need.learn then
    -- The learned bucket counts the call now: no reading will.
    redis.call('HSET', need.learn.k, 'lt', math.max(need.learn.tat, NOW) + 1000 / need.learn.rate, 'lv', need.learn.rate)
  end
  for i, p in ipairs(KINDS) do
    if a[2 + i] >= 0 then
      a[2 + i] = math.max(a[2 + i] - need[p], 0)
    end
  end
end
