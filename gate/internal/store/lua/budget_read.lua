-- Read an upstream's budget as the admission estimates it now, writing
-- nothing. Reply: {requests left, requests limit, requests reset ms,
-- tokens left, tokens limit, tokens reset ms, calls in flight, sends
-- none, learned rate}: left after the calls in flight, -1 when not
-- reported or not known; a reset as time from now, -1 when not said;
-- sends none 1 once a response without rate-limit headers settled, else
-- 0; the rate learned of such a provider (budget_learned.lua), in calls a
-- minute rounded down, -1 while none is known (an operator's reset
-- forgot it: calls go unjudged until the next answer).
local b = budget()
local n, spent = calls()
local held = {r = n, t = spent}
local out = {}
for _, p in ipairs(KINDS) do
  local q = b[p]
  local l, lim, rst = -1, -1, -1
  if q then
    local e = left(q)
    if e then
      l = math.max(e - held[p], 0)
    end
    lim = q.lim
    if q.rst > 0 then
      rst = math.max(q.rst - NOW, 0)
    end
  end
  table.insert(out, l)
  table.insert(out, lim)
  table.insert(out, rst)
end
table.insert(out, n)
local h = learned(KEYS[2])
if h then
  table.insert(out, 1)
else
  table.insert(out, 0)
end
if h and h.limited then
  table.insert(out, math.floor(learnedRate(h) * 60))
else
  table.insert(out, -1)
end
return out
