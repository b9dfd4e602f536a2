-- Baseline for RL.TOKEN: the usual hash-based token bucket (go-zoox api-gateway's
-- token bucket with burst, written as a script): fields `tokens` and `ts`,
-- refilled continuously at rate/window by the elapsed time, in floating
-- point; admitted calls write both fields back and expire the hash when it
-- would be full again.
--
-- KEYS[1]  the bucket
-- ARGV[1]  rate (tokens per window)
-- ARGV[2]  window in ms
-- ARGV[3]  capacity (burst)
-- ARGV[4]  cost, default 1
-- ARGV[5]  optional time in ms instead of TIME (memory figures only)
-- Reply: {allowed, whole tokens left}
local bucket = KEYS[1]
local rate = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local capacity = tonumber(ARGV[3])
local cost = tonumber(ARGV[4]) or 1
local now = tonumber(ARGV[5])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local state = redis.call('HMGET', bucket, 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * rate / window)
else
  now = ts
end
if tokens < cost then
  return {0, math.floor(tokens)}
end
tokens = tokens - cost
redis.call('HSET', bucket, 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', bucket, math.ceil((capacity - tokens) * window / rate))
return {1, math.floor(tokens)}
