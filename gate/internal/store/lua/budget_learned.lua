-- (Prepended to the budget scripts that admit calls or learn, after
-- budget_left.lua.) The rate learned of an upstream whose provider
-- reports no budget, from the calls it accepts and the 429s that end a
-- run of them (budget_learn.lua), kept in the budget's hash beside the
-- readings, fields l…: lh 1 once a response without rate-limit headers
-- settled (the provider sends none, where "none has come back yet" has
-- no field); lr the rate, in calls a second, held since the last cut; lp
-- when that cut was (Redis ms; the start of learning before the first);
-- lk the calls accepted since (those that began after the cut); ls
-- absent until a 429 (no limit is known: calls go unjudged), 0 after one
-- that did not tell the rate (slow start from one call at a time, or
-- again from 0.9 × the rate), 1 after a cut from the rate the provider
-- accepted lately (the probe), 2 after a cut from the rate measured
-- between two 429s (held just under it, then the probe), 3 after a cut
-- from the rate measured across the slow start's climb (a lower bound:
-- held LEARN.span, then the probe over windows of LEARN.span); lt the
-- learned bucket's next free slot (Redis ms), as GCRA keeps it; le the
-- calls accepted lately, each counted down by e every LEARN.recent ms
-- since, at lu (Redis ms): le ÷ LEARN.recent is the rate the provider
-- accepted lately, from every process (the window's count); lc the slow
-- start's cap (calls a second: the rate the first 429's interval
-- implied), past which it climbs linearly; lw the provider's window as
-- the last measure spanned it (ms): a measured rate is held that long
-- before the probe climbs; lj the calls accepted since the climb began
-- (those that began after lp + lw); ld the accepted calls' mean length
-- (ms, a moving mean); lf the calls in flight at the last cut (admitted
-- before it: a slow start is not ended by a 429 until as many were
-- accepted since); lv the rate that wrote lt (the slot's distance is
-- counted in calls at it).
local LEARN = {
  -- A 429 that ends a run holds the rate at this share of what was
  -- accepted, as TCP's multiplicative decrease (CUBIC's 0.7 is for a
  -- link's queue; a quota shared by many loses less by holding close).
  beta = 0.9,
  -- A cut right after the last one (fewer accepted calls in between than
  -- this) found the rate still too high: it cuts by hard instead.
  hard = 0.75,
  -- ... or to the rate accepted since, never below floor × it.
  floor = 0.5,
  -- After a cut the rate climbs back to hold × the rate it was cut from
  -- in flat accepted calls, stays near it as long again, then grows as
  -- CUBIC's does, faster above (1.1 × after twice flat, 2.15 × after
  -- three times): just under what was learned, the provider's bucket
  -- gathers what the probe above it spends before a 429 ends the run.
  hold = 0.95,
  flat = 50,
  up = 0.15,
  -- After a 429 that told no rate the rate doubles every slow accepted
  -- calls (TCP's slow start), from one call at a time, up to the rate
  -- the first 429's interval implied (the calls accepted since learning
  -- began, over the time since, once at least capAt: the provider's
  -- bucket was empty at that 429), then linearly, up × it in flat
  -- accepted calls (TCP's congestion avoidance), then doubling every flat
  -- calls again, never past twice the rate accepted since the 429: a
  -- doubling overshoots by up to the rate for as long as a 429 takes to
  -- come back, the line past the cap by a few calls, and a limit above it
  -- is still found. The 429 that ends it cuts by slowEnd.
  slow = 16,
  slowEnd = 0.9,
  capAt = 4,
  -- The learned bucket holds this many seconds of the rate (at least 2
  -- calls): what may go at once.
  burst = 0.1,
  -- The learned quota's window (ms): the reading the judge is given
  -- refills the rate over it; the turns told before the first 429
  -- (unlimited) and while the rate climbs (learnedTurns) never pass it.
  window = 2000,
  -- How far a caller the rate refuses is told its turn (ms): a minute,
  -- the providers' limits' window; the queue's turns start over at it,
  -- as a reading's at its reset (learnedTurns).
  horizon = 60000,
  -- The turns told are this share of one call's refill apart: a queue
  -- told exactly at the rate loses each turn a caller late to it leaves.
  ahead = 0.9,
  -- Between two 429s that end runs the provider's bucket went from
  -- empty to empty: the calls it accepted in between, over the time
  -- between, are the rate it refills at, whatever it gathered while the
  -- gate held under it. Measured over at least span ms and enough
  -- accepted calls (the answers' jitter is a call or two), the rate is
  -- held at sure × it: the bucket gathers the rest, which a probe above
  -- spends before its 429.
  span = 400,
  enough = 12,
  sure = 0.97,
  -- A measured rate is held for the provider's window as the measure
  -- spanned it (the time between the two 429s, within span and widest
  -- ms), not a count of calls: a limit that rises is probed within one
  -- window whatever the rate. Then it climbs as CUBIC's does over a
  -- window, to (sure + up) × what was measured, and doubles every window
  -- past that: a limit that doubled is reached 1.8 windows into the
  -- climb. (Doubling every half window, a climb that spent what the
  -- provider's bucket gathered met the limit at up to twice it: bursts
  -- of 12 to 14 429s in the storms.)
  widest = 4000,
  -- A 429 that ends a climb measures the rate over the hold and the
  -- climb, which a limit that rose drags down: where the calls accepted
  -- since the climb began came rose times faster than those of the hold,
  -- they are the measure. Not below that: a climb that spent what the
  -- provider's bucket gathered in the hold would hold the rate above the
  -- limit.
  rose = 1.25,
  -- The 429 that ends a slow start measures the rate over its climb,
  -- from the first 429 on: the provider's bucket was empty at both, but
  -- a limit that rose within (the slow start ran past it while the
  -- bucket gathered, then spent it) is averaged with the old one. The
  -- calls' counts cannot tell that from a limit that held (at the slow
  -- start's end the rate accepted lately is about twice the measure in
  -- both), only a probe can: the measure is a lower bound, held span ms,
  -- then probed over windows of span ms. The 429 that ends that probe
  -- measures the rate, held for the slow start's window or its own,
  -- whichever is longer: a limit that held costs one probe early in
  -- place of one a window later, and one that doubled is followed about
  -- 1.8 × span ms after the hold.

  -- A cut never holds the rate below this share of what the provider
  -- accepted lately.
  keep = 0.5,
  -- The slowest rate held, calls a second.
  min = 0.05,
  -- How long an accepted call counts toward the rate accepted lately
  -- (ms, its mean life): the probe never passes twice that rate, so a
  -- light load does not raise the rate it does not use.
  recent = 500,
  -- Before the first 429 no rate is known, but the calls in flight are
  -- bounded: start of them at first, one more for each call the
  -- provider accepted since (TCP's slow start on completions, not on
  -- time). A provider without limits is never paced: start callers at
  -- once are never refused, and the bound doubles with every round of
  -- calls that come back. A queue that comes back at once (the callers
  -- refused while the first call ran) meets the provider's bucket start
  -- at a time, the rest one turn apart, not all together.
  start = 32,
  -- A call's length before any was measured (ms), and the weight of each
  -- new one in the mean (ld).
  length = 100,
  lengthWeight = 0.2,
}

-- learned reads what was learned of the upstream whose budget is k; nil
-- when its provider is not known to send no budget.
local function learned(k)
  local v = redis.call('HMGET', k, 'lh', 'lr', 'lp', 'lk', 'ls', 'lt', 'le', 'lu', 'lw', 'ld', 'lc', 'lj', 'lf', 'lv')
  if not v[1] then
    return nil
  end
  -- (No rate: nothing learned yet, or an operator's reset forgot it.)
  return {rate = tonumber(v[2]) or LEARN.min, at = tonumber(v[3]) or NOW, k = tonumber(v[4]) or 0,
    limited = tonumber(v[2]) ~= nil and (v[5] == '0' or v[5] == '1' or v[5] == '2' or v[5] == '3'),
    cut = v[5] == '1' or v[5] == '2' or v[5] == '3',
    measured = v[5] == '2' or v[5] == '3', lower = v[5] == '3', tat = tonumber(v[6]) or 0,
    lately = tonumber(v[7]) or 0, upd = tonumber(v[8]) or NOW, hold = tonumber(v[9]) or LEARN.span,
    rated = tonumber(v[2]) ~= nil,
    length = tonumber(v[10]), cap = tonumber(v[11]), j = tonumber(v[12]) or 0, flight = tonumber(v[13]) or 0,
    tatRate = tonumber(v[14])}
end

-- unlimited judges a call to the upstream whose budget is bk and calls in
-- flight ck, whose provider sends no budget (h, learned's) and refused
-- nothing yet: admitted while fewer than LEARN.start calls and one per
-- call accepted since learning began are in flight (the calls reserved),
-- else refused until its turn: the bound frees a call every call's length
-- ÷ bound, and the refusals queue that far apart (the budget's qn, as
-- admit's turns), never past LEARN.window.
local function unlimited(bk, ck, h, tokens)
  local n = inflight(ck)
  local bound = LEARN.start + h.k
  if n < bound then
    return {1, 0, -1, -1, 0, 4}, {r = 1, t = tokens}
  end
  local gap = math.max(math.ceil((h.length or LEARN.length) / bound), 1)
  local qn = tonumber(redis.call('HMGET', bk, 'qn')[1]) or 0
  local turn = math.min(math.max(NOW + gap, qn + gap), NOW + LEARN.window)
  redis.call('HSET', bk, 'qn', turn)
  return {2, turn - NOW, -1, -1, 0, 4}
end

-- holdOf is how long a measured rate is held before the probe climbs,
-- and the climb's window (ms): the provider's window as the measure
-- spanned it, or LEARN.span after a lower bound.
local function holdOf(h)
  if h.lower then
    return LEARN.span
  end
  return h.hold
end

-- accepted is the rate the provider accepted lately, calls a second.
local function accepted(h)
  return h.lately * math.exp(-math.max(NOW - h.upd, 0) / LEARN.recent) * 1000 / LEARN.recent
end

-- acceptedSince is the rate the provider accepted since the last cut
-- (the first 429 before any cut), calls a second: its bucket was empty at
-- that 429, so its limit is no lower.
local function acceptedSince(h)
  return h.k * 1000 / math.max(NOW - h.at, 1)
end

-- learnedRate is the rate admitted at NOW: slow start before the first
-- cut (linear past its cap), then, after a measured cut, held for the
-- provider's window and CUBIC's climb in time; after another cut
-- CUBIC's curve in accepted calls since it or in windows of time (as the
-- last measure spanned it, LEARN.flat calls a window), whichever went
-- further: where few calls are accepted (a low rate, a busy machine) a
-- climb in calls alone held half the limit for seconds. Above the rate held, never
-- past twice what the provider accepted lately (a light load does not
-- raise it unused). It returns the rate and whether it climbs.
local function learnedRate(h)
  local r
  -- climbing: above any rate the provider was seen to take (the slow
  -- start, a probe past its hold), where the limit is not known.
  local climbing = not h.cut
  if not h.cut then
    r = h.rate * 2 ^ math.min(h.k / LEARN.slow, 8)
    if h.cap and r > h.cap then
      -- Past the cap (or from it, where the slow start began above it):
      -- linear from the call that reached it, up × it in flat accepted
      -- calls; past that without a 429 the limit is higher still, and the
      -- rate doubles every flat calls.
      local base = math.max(h.cap, h.rate)
      local y = math.min(math.max(h.k - LEARN.slow * math.log(base / h.rate) / math.log(2), 0) / LEARN.flat, 8)
      r = base * (1 + LEARN.up * math.min(y, 1)) * 2 ^ math.max(y - 1, 0)
      -- The doubling never passes twice the rate accepted since the 429
      -- that began the slow start: the provider's bucket was empty then,
      -- so that rate is its refill or less. (In calls alone the climb
      -- reached 2.7 × the limit while the bucket, gathered on the way up,
      -- paid for it: bursts of 5 to 8 429s when it ran dry.)
      r = math.min(r, math.max(base * (1 + LEARN.up), 2 * acceptedSince(h)))
    end
  elseif h.measured then
    -- Held at what was measured (h.rate, sure × it) for the window, then
    -- CUBIC's climb over a window, doubling every window after.
    local w = holdOf(h)
    local x = math.min(math.max(NOW - h.at - w, 0) / w, 8)
    climbing = x > 0
    r = h.rate / LEARN.sure * (LEARN.sure + LEARN.up * math.min(x, 1) ^ 3) * 2 ^ math.max(x - 1, 0)
    if h.lower then
      -- After a lower bound the windows are short (LEARN.span), and the
      -- doubling ran to 1.8 × a limit that held before its 429: never
      -- past 1.5 × the rate accepted since the cut (the provider's bucket
      -- was empty there), nor below the line's (sure + up) × the measure.
      r = math.min(r, math.max(h.rate / LEARN.sure * (LEARN.sure + LEARN.up), 1.5 * acceptedSince(h)))
    end
  else
    local w = holdOf(h)
    local x = math.min(math.max(h.k - LEARN.flat, (NOW - h.at - w) * LEARN.flat / w) / LEARN.flat, 8)
    local c = LEARN.hold - LEARN.beta
    if x > 0 then
      c = LEARN.up
      climbing = true
    end
    r = h.rate / LEARN.beta * (LEARN.hold + c * x * x * x)
  end
  r = math.min(r, math.max(h.rate, 2 * accepted(h)))
  return math.max(r, LEARN.min), climbing
end

-- learnedTurns is the last turn told (qn, Redis ms; told at the rate qv,
-- calls a second, or r where none was) at the rate r now,
-- and the furthest a turn is told: the refusals were told their turns one
-- call apart at the rate then (qv, calls a second), so the queue is as
-- many calls ahead, which a rate that rose since runs through sooner and
-- one that fell later; a fall is not counted (the queue's callers come
-- back early and queue again: counted too, they stood twice in it and
-- the provider sat idle). The turns reach LEARN.horizon: a caller behind
-- a backlog of tens of seconds is told its turn once. (Held to
-- LEARN.window, it came back every 2 s: 20 to 60 round trips a job.)
-- While the rate climbs (climbing: the slow start, a probe past its
-- hold) the limit above it is not known, and the turns reach
-- LEARN.window, as before: told far at a rate that then rose, a queue
-- came back at its old spacing once the arrivals ended (a doubled
-- limit's goodput 0.82 where it was 0.93 or more).
-- It returns the turn before the next, the furthest a turn is told, and
-- the next turn's distance from it, gap (one call's refill, ms) ×
-- LEARN.ahead.
local function learnedTurns(qn, qv, r, gap, climbing)
  qv = qv or r
  if qv < r then
    qn = NOW + (qn - NOW) * qv / r
  end
  local far = LEARN.horizon
  if climbing then
    far = LEARN.window
  end
  return qn, NOW + far, math.ceil(gap * LEARN.ahead)
end

-- owed is the calls the learned bucket owes at NOW: its next free slot's
-- distance at the rate that wrote it (lv), not at r, the rate now (a
-- rate that rose since would read the same slot as more calls owed: a
-- caller told its turn was refused again at it).
local function owed(h, r)
  return math.max(h.tat - NOW, 0) * (h.tatRate or r) / 1000
end

-- learnedQuota is the learned rate as a reading the judge knows (budget_judge.lua):
-- a limit that refills at the rate, holding what the learned bucket
-- holds, over LEARN.window. The bucket counts each call as it is
-- admitted, not as it settles, so the n calls in flight and the reserve
-- kept against a reading's lag are added back. It returns the quota, the
-- rate, the learned bucket's next free slot at that rate, and whether
-- the rate climbs (learnedRate).
local function learnedQuota(h, n, keep)
  local r, climbing = learnedRate(h)
  local burst = math.max(2, r * LEARN.burst)
  -- (A thousandth of a call more: the slot stored as a decimal string
  -- and floating point dust must not refuse a call at its very slot.)
  local debt = owed(h, r)
  local lvl = math.max(burst - debt + 1e-3, 0)
  local rem = lvl + n + keep
  return {at = NOW, rem = rem, lim = rem + r * LEARN.window / 1000, rst = NOW + LEARN.window}, r, NOW + debt * 1000 / r, climbing
end

-- first judges a call to an upstream with no reading yet and not known to
-- send none: one call at a time, until the first reading (or the first
-- response without one) settles.
local function first(ck, tokens)
  if #redis.call('ZRANGEBYSCORE', ck, '(' .. NOW, '+inf', 'LIMIT', 0, 1) > 0 then
    return {3, 0, -1, -1, 0, 3}
  end
  return {1, 0, -1, -1, 0, 3}, {r = 1, t = tokens}
end

-- learnt is what judged a call (need: admit's): 1 a rate learned from the
-- provider's accepted calls (a cut), 2 one starting slowly, 0 a reading
-- (3: one call at a time before anything is known, first; 4: the bound
-- in flight before the first 429, unlimited).
local function learnt(need)
  if not need.learn then
    return 0
  elseif need.learn.cut then
    return 1
  end
  return 2
end
