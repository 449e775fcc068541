-- An upstream's value, read once for every script (store/values.go
-- describes its shapes; parseUpstream is its Go reading). Package
-- upstream's TestUpstreamScriptsAgree runs one table through both.
-- upstream_parse returns st ('c', 'p' or 'h'), reason, level, until and
-- the rest (a probe's token, an operator's note). Level and until are up
-- to 18 digits. It returns nil for a value of any other shape: foreign,
-- never taken for a wait or a probe.
local function upstream_parse(v)
  local st, reason, n, untl, rest = string.match(v, '^([cph]):([^:]*):(%d+):(%d+):(.*)$')
  if st == 'c' then
    return nil
  elseif not st then
    st, reason, n, untl = string.match(v, '^([cp]):([^:]*):(%d+):(%d+)$')
  end
  if st and (#n > 18 or #untl > 18) then
    return nil -- past what every Lua reads as a number
  end
  return st, reason, n, untl, rest
end

-- upstream_may says whether a call may go to an upstream holding v
-- (false: no key) at now ms: it is ready, or its cooldown or pause is
-- over and the first call claims the probe. Package upstream's judge
-- says the same (Permitted or MayProbe).
local function upstream_may(v, now)
  if not v then
    return true
  end
  local st, _, _, untl = upstream_parse(v)
  return (st == 'c' or st == 'p') and tonumber(untl) <= now
end
