-- An operator's reset of an upstream forgets the rate learned of its
-- provider (budget_learned.lua), keeping that it sends no budget: the
-- next calls go unpaced, bounded in flight from LEARN.start again, until
-- a 429 starts the rate again. KEYS as
-- budget_left.lua's. HSET, not HDEL: the ACL the budget needs already
-- allows it. Reply: 1 when something was learned, else 0.
if redis.call('HMGET', KEYS[2], 'lh')[1] then
  redis.call('HSET', KEYS[2], 'lr', '', 'ls', '', 'lk', 0, 'lt', 0, 'le', 0, 'lw', '', 'lj', 0, 'lc', '')
  return 1
end
return 0
