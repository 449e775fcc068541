-- Take a job if it is free (job_take.lua). KEYS[1] the job's key (its
-- value: values.go). ARGV[1] token, ARGV[2] lease ms.
-- Reply: {0, now ms, value, pttl}          refused by the value
--        {1, now ms, fence, previous value or false, its pttl}  taken
return take(KEYS[1], ARGV[1], ARGV[2])
