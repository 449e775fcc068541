-- (Prepended to budget_record.lua, after budget_learned.lua.) teach
-- learns the rate of the upstream whose budget is k from a call settled
-- with no reading: answer '1' the provider accepted the call, '0' it
-- refused it with a 429, '2' it answered otherwise (that it sends no
-- budget is all that tells); ran how long the call ran (ms); keep how
-- long what is learned is kept (ms).
-- An accepted call that began after the last cut counts toward the probe
-- upward. A 429 of a call that began after the last cut ends the run
-- since: the rate is cut to LEARN.sure × the rate measured between the
-- two 429s (the calls accepted in between over the time between, from
-- every process) when they span enough, or between the climb's start and
-- the 429 where a limit that rose made those come faster; else to
-- LEARN.beta × the lower
-- of the rate admitted and the rate the provider accepted lately, or
-- between LEARN.floor and LEARN.hard × the rate when the last cut was
-- just made. A 429 of a call that began before the last cut is that
-- cut's, and cuts nothing.
-- Until a 429 no limit is known (admission leaves the calls unjudged);
-- the first one cuts to the rate the provider accepted lately when
-- enough calls tell it and it is below one call per ran (one call at a
-- time), else to one call at a time,
-- from which the rate starts slowly (TCP's slow start), doubling every
-- LEARN.slow accepted calls up to the rate the first 429's interval
-- implied, then linearly past it (doubling again where that finds no
-- limit), until a 429 ends it.
local function teach(k, ck, answer, ran, keep)
  local ok, answered = answer == '1', answer == '2'
  ran = math.max(ran, 1)
  local h = learned(k)
  if not h or not h.rated then
    -- Learning begins when the first call settled began (the rate the
    -- first 429's interval implies counts from there); that call is not
    -- one the bound before the first 429 grows by.
    h = {rate = math.max(1000 / ran, LEARN.min), at = NOW - ran, k = 0, limited = false, cut = false, tat = 0, lately = 0, upd = NOW,
      hold = LEARN.span, j = 0, first = true}
    redis.call('HSET', k, 'lh', 1, 'lr', h.rate, 'lp', h.at, 'lk', 0)
  end
  if answered then
    -- Neither accepted nor refused for the rate (a failure of the job's
    -- own): it tells only that no budget came back.
  elseif ok then
    -- (A call that began before the last cut counts toward the run the cut
    -- ended: the rate measured between two 429s counts the calls that
    -- began between them.)
    if NOW - ran >= h.at and not h.first then
      h.k = h.k + 1
    end
    -- (And toward the climb's measure once it began.)
    if h.measured and NOW - ran >= h.at + holdOf(h) then
      h.j = h.j + 1
      redis.call('HSET', k, 'lj', h.j)
    end
    h.lately, h.upd = accepted(h) * LEARN.recent / 1000 + 1, NOW
    local d = ran
    if h.length then
      d = h.length + LEARN.lengthWeight * (ran - h.length)
    end
    redis.call('HSET', k, 'lk', h.k, 'le', h.lately, 'lu', NOW, 'ld', d)
  elseif not h.limited or NOW - ran >= h.at and (h.cut or h.k >= math.max(1, h.flight)) then
    -- The first 429, or one that ends a run since the last cut. (In slow
    -- start a 429 before any call was accepted since it began is its
    -- start's: the provider's bucket, empty then, was not seen to refill,
    -- and slow start grows by accepted calls only. Cut again, it set the
    -- linear climb's cap at 0.9 × one call at a time: 19 a second at a
    -- limit of 50, a slow start of 6 s whose bucket, gathered, was spent
    -- in a burst of 11 429s. So is one before as many calls were accepted
    -- as were in flight at its start, as TCP's recovery waits for the
    -- data sent before a loss: those calls, admitted at the old rate,
    -- reach the provider late on a busy machine and take what its bucket
    -- refilled, and the slow start's next call meets their 429.)
    -- What was accepted lately tells the rate once it spans a while since
    -- learning began (or the last cut) and counts a few calls.
    local measured = h.lately >= 4 and NOW - h.at >= LEARN.recent
    local r, factor, ls = learnedRate(h), LEARN.beta, 1
    if measured then
      r = math.min(r, accepted(h))
    end
    -- Since the last cut (a 429 too: the provider's bucket was empty) the
    -- provider accepted h.k calls, and its bucket is empty again: that is
    -- its rate, measured. (Since learning began, the bucket may have held
    -- some at first: more than its rate.)
    local span, m, cap = NOW - h.at, nil, nil
    local hold = math.min(math.max(span, LEARN.span), LEARN.widest)
    if span >= LEARN.span and h.k >= LEARN.enough then
      m = h.k * 1000 / span
      -- A climb that followed a limit that rose: the calls accepted
      -- since it began, not the hold's, tell the rate.
      local climbed = NOW - h.at - holdOf(h)
      if h.measured and climbed >= LEARN.span and h.j >= LEARN.enough and
        h.j * 1000 / climbed > LEARN.rose * math.max(h.k - h.j, 0) * 1000 / holdOf(h) then
        m = h.j * 1000 / climbed
      end
    end
    if not h.limited then
      -- The first 429: what was accepted lately, else one call at a time
      -- (one per the call's length), from which the rate starts slowly
      -- up to the rate accepted since learning began: the provider's
      -- bucket is empty at this 429.
      -- One call's length is the accepted calls' mean, unless this one
      -- ran shorter: a 429 that a stalled process took 200 ms to see
      -- held the rate at 0.9 × 5 a second where calls took 45 ms. The
      -- 429 was decided when its call reached the provider, one call's
      -- length before its answer: the interval ends there (to its answer,
      -- the cap was 0.65 to 0.85 × the limit, and a slow start that
      -- climbed past it for 3 s let the provider's bucket gather what it
      -- then spent at twice the limit: bursts of 5 to 8 429s at its end).
      local one = math.min(ran, h.length or ran)
      r, ls = math.max(1000 / one, LEARN.min), 0
      if h.k >= LEARN.capAt and span > 0 then
        cap = (h.k + 1) * 1000 / math.max(span - one, one)
      end
      if measured and accepted(h) < r then
        -- The provider accepted less than one call at a time would send:
        -- that is its rate, held under and then probed. (Where it
        -- accepted more, one call at a time is only where the slow start
        -- begins: held as a cut, it climbed by accepted calls at half the
        -- limit for seconds on a busy machine, goodput 0.6.)
        r, ls = accepted(h), 1
      end
    elseif h.cut and h.k < LEARN.flat / 2 then
      -- Few calls since the last cut: the limit fell (halved, say). One
      -- call more than were accepted since, over the time since, bounds
      -- the rate from above; never below LEARN.floor × it.
      r, factor = math.max(math.min(r * LEARN.hard, (h.k + 1) * 1000 / math.max(span, 1) * LEARN.sure), r * LEARN.floor), 1
    elseif m then
      r, factor, ls = m, LEARN.sure, 2
      if not h.cut then
        -- Across the slow start's climb: a lower bound (LEARN.rose's
        -- note below it).
        ls = 3
      elseif h.lower then
        -- The probe after a lower bound: the slow start's window, if
        -- longer, is the provider's.
        hold = math.max(hold, h.hold)
      end
    elseif not h.cut and measured then
      -- The end of slow start: the rate grew past the limit while the
      -- provider's bucket paid for it; what was accepted lately tells the
      -- rate, or more.
      factor = LEARN.slowEnd
    elseif not h.cut then
      -- Slow start ends with nothing measured: slowly up again from
      -- slowEnd × the rate (not TCP's half: on a stalled machine 429s of
      -- calls sent late come close together, and halving at each would
      -- take the rate to nothing).
      factor, ls = LEARN.slowEnd, 0
    end
    -- Never below keep × what the provider accepted lately: on a stalled
    -- machine one call's length (a stalled call's) and 429s that come
    -- close together would take the rate to nothing, where the provider
    -- just took that much.
    r = math.max(r * factor, LEARN.keep * accepted(h))
    if ls == 0 and h.limited then
      -- Slow start again, from slowEnd × the rate it failed at: linear
      -- from there.
      cap = r
    end
    h = {rate = math.max(r, LEARN.min), at = NOW, k = 0, limited = true, cut = ls >= 1, measured = ls >= 2, lower = ls == 3, tat = h.tat, tatRate = h.tatRate,
      lately = h.lately, upd = h.upd, hold = hold, j = 0, cap = cap}
    -- The learned bucket is emptied: the calls it gathered meanwhile would
    -- all meet the provider's empty one, and so would a call sent at once;
    -- the next goes one call's refill later (when the provider's bucket
    -- holds one again), then the rest at the rate.
    local nr = learnedRate(h)
    h.tat = math.max(NOW + owed(h, nr) * 1000 / nr, NOW + math.max(2, nr * LEARN.burst) * 1000 / nr)
    redis.call('HSET', k, 'lr', h.rate, 'lp', NOW, 'lk', 0, 'ls', ls, 'lt', h.tat, 'lw', hold, 'lj', 0, 'lc', cap or '', 'lf', inflight(ck), 'lv', nr)
  end
  if redis.call('PTTL', k) < keep then
    redis.call('PEXPIRE', k, keep)
  end
end
