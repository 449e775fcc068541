-- (scope_lib.lua is prepended.) Cluster form of the scope update.
-- KEYS[1] scope, KEYS[2] scope failures; ARGV as scope_update.
return scope_update(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
