-- Leave: drop ARGV[1] from the line; if it was its tenant's last entry,
-- the tenant's finish tag goes back to the entry's start. KEYS[4] the
-- owner's list of grants: a turn given and not yet collected is taken
-- back from it.
-- Reply: 1 dropped; 2 it had been given a turn (its owner passes the turn
-- on); 0 not in the line (dropped with its process's lease, or lost).
local m = ARGV[1]
local _, _, _, _, owner = parse(m)
redis.call('SREM', KEYS[2] .. ':' .. owner, m)
if redis.call('ZREM', KEYS[1], m) == 0 then
  if redis.call('LREM', KEYS[4], 1, m) > 0 then
    return 2
  end
  return 0
end
forget(m)
return 1
