-- (Prepended to the scripts that admit calls, after budget_judge.lua.)
-- The budget and its upstream's line are one idea of whose turn it is
-- (gate/internal/line): while anyone waits in the line, a call is
-- admitted only with the turn the line gave it, whose call was reserved
-- when the turn was given (line_give.lua); any other call is refused and
-- told its turn after everyone waiting, one call's refill apart, and
-- never sooner than the refusals told before it (the budget's qn).
-- The line's key is the budget's with ':line' for ':budget' (the
-- upstream's slot).

-- gap is the time one call's request refills (ms), 0 when the budget
-- does not say how it refills.
local function gap(b)
  local q = b.r
  if q and refills(q) then
    return math.ceil((q.rst - q.at) / (q.lim - q.rem))
  end
  return 0
end

-- turn_member is the reservation a turn holds for the caller at line
-- member m (its sequence number): store.TurnMember.
local function turn_member(m)
  return 'turn:' .. string.sub(m, 19, 30) .. ':0'
end

-- line_admit is admit, in line: turn is the reservation of the turn the
-- caller was given ('' for none). The reply gains the gap (ms) as its
-- fifth item when a budget judged the call. A turn found is returned
-- third: the script removes it (turn_taken) once it took the job, or
-- gave it up, never before: an acquire writes nothing before its take,
-- or Redis lets the take past maxmemory.
-- turn_taken removes the turn line_admit found in the calls ck (nil:
-- none).
local function turn_taken(ck, turn)
  if turn then
    redis.call('ZREM', ck, turn)
  end
end

local function line_admit(bk, ck, tokens, reserve, share, turn)
  local b = budget(bk)
  if not b.r and not b.t then
    -- No reading: one call at a time before anything is known, or the
    -- rate learned of a provider that sends none (admit); no line. A
    -- turn given meanwhile reserved its call (line_give.lua): one at a
    -- time, that call is the turn's, not one in flight that refuses it;
    -- by a learned rate it is judged as one in flight, which the quota
    -- adds back. Either way its reservation, while it holds, is taken
    -- over.
    local held = turn ~= '' and redis.call('ZSCORE', ck, turn)
    held = held and tonumber(held) > NOW and turn or nil
    if held and not learned(bk) then
      return {1, 0, -1, -1, 0, 3}, {r = 1, t = tokens}, held
    end
    local a, need = admit(bk, ck, tokens, reserve, share, b)
    return a, need, held
  end
  local g = gap(b)
  local held = turn ~= '' and redis.call('ZSCORE', ck, turn)
  if held and tonumber(held) > NOW then
    -- Its call was reserved with the turn: this reservation replaces it.
    return {1, 0, -1, -1, g}, {r = 1, t = tokens}, turn
  end
  -- A turn not held (it lapsed: the budget no longer counts its call; or
  -- it was never given) is no turn: the call waits behind the line as
  -- one with none does.
  local line = string.sub(bk, 1, -8) .. ':line'
  local n = redis.call('ZCARD', line)
  if n > 0 and redis.call('ZCOUNT', line .. ':owners', '(' .. NOW, '+inf') == 0 then
    -- Every process with callers in line died: nobody waits behind
    -- them (the next give drops their places).
    n = 0
  elseif n > 0 and redis.call('GET', string.sub(bk, 1, -8)) then
    -- The upstream cools, is paused or probed: its breaker decides (the
    -- probe's call must not wait behind the line, which gives no turn
    -- until the upstream is ready again).
    n = 0
  end
  local qn = 0
  if n > 0 then
    -- (HMGET: the budget's documented ACL has no HGET.)
    qn = tonumber(redis.call('HMGET', bk, 'qn')[1]) or 0
  end
  local a, need = admit(bk, ck, tokens, reserve, share, b)
  if n > 0 and a[1] ~= 0 then
    -- Callers wait: not admitted past them.
    local wait = math.max(a[1] == 2 and a[2] or 0, (n + 1) * g, 1)
    if g > 0 then
      wait = math.max(wait, qn + g - NOW)
      redis.call('HSET', bk, 'qn', NOW + wait)
    end
    return {2, wait, a[3], a[4], g}
  end
  if a[1] ~= 0 then
    a[5] = g
  end
  return a, need
end
