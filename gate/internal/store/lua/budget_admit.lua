-- Admit a call by its upstream's budget (budget_judge.lua), in the
-- acquire's round trip. ARGV[1] the member that reserves the call
-- ("<token>:<tokens>"; "" to judge only), ARGV[2] lease ms (a reservation
-- lapses after it unless the call's renewals keep it: budget_renew.lua),
-- ARGV[3] the tokens the call will spend (0: not said), ARGV[4] the
-- requests kept in reserve, ARGV[5] the share of the token limit kept in
-- reserve for a call that does not say its tokens, ARGV[6] the
-- reservation of the turn the line gave the caller ('' for none:
-- budget_line.lua).
-- A call is judged but not reserved while the upstream's key holds a
-- cooldown, pause or probe: the breaker refuses it, or it claims the
-- probe, which the budget must admit too.
-- Reply: {0} nothing to judge (no budget);
-- {1, 1 reserved / 0, requests left, tokens left} admitted;
-- {2, wait ms, requests left, tokens left} refused until the estimate
-- fits; {3, 0, requests left, tokens left} refused until a call in
-- flight settles (its reading tells more). Left counts are what the
-- estimate leaves after the calls in flight (and this one, reserved), -1
-- when not reported. A judged reply ends with one call's refill (ms, 0:
-- not known): budget_line.lua.
local a, need, turn = line_admit(KEYS[2], KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] or '')
turn_taken(KEYS[3], turn)
if a[1] == 1 and ARGV[1] ~= '' and not redis.call('GET', KEYS[1]) then
  reserve(a, need, KEYS[3], ARGV[1], tonumber(ARGV[2]))
end
return a
