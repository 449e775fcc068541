-- (scope_lib.lua is prepended.) Cluster form of the acquire's scope check,
-- on the scope's own slot. KEYS[1] scope.
-- ARGV[1] the acquire's token, ARGV[2] lease ms,
-- ARGV[3] "1" to claim the probe when the wait is over, "0" only to read.
-- Reply: {value, wait ms} while the scope refuses; {false, 0} when it is
-- open; {false, 1} when this caller claimed the probe.
local r, reason, n = scope_peek(KEYS[1])
if r == true then
  if ARGV[3] == '1' then
    scope_claim(KEYS[1], reason, n, ARGV[1], ARGV[2])
    return {false, 1}
  end
  return {false, 0}
end
return r or {false, 0}
