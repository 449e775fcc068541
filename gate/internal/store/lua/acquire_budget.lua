-- An acquire on one node whose upstreams have budgets, in one script: the
-- upstreams are judged first, and the job is taken only when one of them
-- may take the call, which then reserves it (Store.Acquire).
-- KEYS[1] the job's key; then three keys per upstream, in the order calls
-- try them: its key, its budget and its calls in flight (budget_left.lua).
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] the member that reserves the
-- call ("" for none), ARGV[4] the tokens the call will spend, ARGV[5] the
-- requests kept in reserve, ARGV[6] the share of the token limit kept in
-- reserve for a call that does not say its tokens, ARGV[7] the
-- reservation of the turn the line gave the caller ('' for none) in the
-- ARGV[8]th upstream (budget_line.lua).
-- An upstream may take the call when its budget does not refuse it and
-- upstream_may says so (upstream_value.lua, the one reading shared with
-- package upstream's judge and tested against it). The first that
-- may take the call reserves it if it is ready and has a budget, and only
-- once the job is taken: a probe's call is not reserved, as
-- budget_admit.lua does not reserve it.
-- Reply: {job} for a job held (first, below), else {job, values,
-- admissions}: job is take's reply (job_take.lua),
-- or {2, now ms} when no upstream may take the call and the job is free
-- (a job held, its call running or its cooldown not over, is refused by
-- its own state: take's refusal, as a cluster's take-first acquire
-- answers); values the upstreams' values (false: none); admissions
-- budget_admit.lua's reply for each.
-- A job held (its call running, its cooldown not over) is refused by its
-- own state first: take's refusal, nothing written, and no budget judged
-- (a retry storm's refusals cost a GET, not the budget's work). Reply
-- {job} alone: the upstreams were not asked. A caller holding a turn of
-- the line goes on, so its turn is taken or kept as below.
-- ARGV[9] is '' but for an acquire sent in its caller's join to the
-- line (Trip.AcquireInTurn): the owner whose place at the mark, the last
-- key, the join wrote. The turn is that place's, given in the join's
-- round trip; without it held the reply is {}, nothing read or written.
local ups, turn = (#KEYS - 1) / 3, ARGV[7]
if ARGV[9] and ARGV[9] ~= '' then
  ups = (#KEYS - 2) / 3
  local m = redis.call('GET', KEYS[#KEYS])
  turn = m and string.match(string.sub(m, 31), '^:%d+:%d+:([^:]*):') == ARGV[9] and turn_member(m) or ''
  local at = turn ~= '' and redis.call('ZSCORE', KEYS[3 * tonumber(ARGV[8]) + 1], turn)
  if not at or tonumber(at) <= NOW then
    return {}
  end
end
-- The job's value is read once: nothing below writes it before take.
local held = redis.call('GET', KEYS[1])
if turn == '' and held then
  local st, untl = string.match(held, '^([cfd]):(%d+):')
  if not st or tonumber(untl) > NOW then
    return {{0, NOW, held, redis.call('PTTL', KEYS[1])}}
  end
end
local lease, member = tonumber(ARGV[2]), ARGV[3]
local tokens, keep, share = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local values, admissions, needs, turns = {}, {}, {}, {}
local first
for i = 1, ups do
  local o = 3 * i - 1
  local v = redis.call('GET', KEYS[o])
  local mine = ''
  if tostring(i) == ARGV[8] then
    mine = turn
  end
  local a, need, taken = line_admit(KEYS[o + 1], KEYS[o + 2], tokens, keep, share, mine)
  values[i], admissions[i], needs[i], turns[i] = v, a, need, taken
  if not first and upstream_may(v, NOW) and a[1] <= 1 then
    first = i
  end
end
if not first then
  for i = 1, ups do
    turn_taken(KEYS[3 * i + 1], turns[i])
  end
  -- A job held (its call running, its cooldown not over) is refused by
  -- its own state: take's refusal, nothing written. A duplicate of a
  -- running job is told ErrInFlight and the call's time left, not the
  -- upstream's wait.
  if held then
    local st, untl = string.match(held, '^([cfd]):(%d+):')
    if not st or tonumber(untl) > NOW then
      return {{0, NOW, held, redis.call('PTTL', KEYS[1])}, values, admissions}
    end
  end
  return {{2, NOW}, values, admissions}
end
local job = take(KEYS[1], ARGV[1], ARGV[2], held, T)
for i = 1, ups do
  turn_taken(KEYS[3 * i + 1], turns[i])
end
local a = admissions[first]
if job[1] == 1 and member ~= '' and not values[first] and a[1] == 1 then
  reserve(a, needs[first], KEYS[3 * first + 1], member, lease)
end
return {job, values, admissions}
