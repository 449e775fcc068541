-- (scope_lib.lua is prepended.) Cluster form of the scope update, on the
-- scope's own slot. KEYS[1] scope, KEYS[2] scope failures.
-- ARGV[1] op, ARGV[2] reason, ARGV[3] ttl ms, ARGV[4] allowed failures,
-- ARGV[5] window ms, ARGV[6] this failure's member in the window.
-- Reply: {scope value or false, pttl}.
return scope_update(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
