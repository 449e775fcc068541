-- Turn: give up to ARGV[1] turns, in the line's order, skipping callers
-- whose deadline passed or whose process's lease ended. Each turn goes on
-- its owner's list of grants (ARGV[2] .. owner), which is published so
-- the owner's process collects it at once. ARGV[3] lease ms (a list not
-- collected within it belongs to a dead process), ARGV[4] keep ms.
-- Reply: the members given a turn, in order.
local now = now_ms()
reap(now, 256)
local n = tonumber(ARGV[1])
local out, lists, skip = {}, {}, {n = 0}
local function any() return true end
while #out < n do
  local m, owner = next_turn(now, skip, any, ARGV[4])
  if not m then
    break
  end
  grant(ARGV[2], m, owner, lists)
  out[#out + 1] = m
end
publish(lists, ARGV[3])
if redis.call('EXISTS', KEYS[3]) == 1 then
  keep(ARGV[4])
end
return out
