-- Baseline for RL.SLIDING, in the style of AxumKit: a sorted set
-- with one member per admitted call (a UUID-like string, scored by its time
-- in ms): trim what left the window, count, refuse with a retry time taken
-- from the oldest entry, else add the call and refresh the expiry. The
-- time is the server's (TIME), as a native command's would be.
--
-- KEYS[1]  the log
-- ARGV[1]  window in ms
-- ARGV[2]  max requests per window
-- ARGV[3]  this call's member (UUID-like, from the client)
-- ARGV[4]  optional time in ms instead of TIME (used only to build the
--          memory figures' logs at distinct milliseconds)
-- Reply: {allowed, count, retry_after_ms}
local log = KEYS[1]
local window = tonumber(ARGV[1])
local max_requests = tonumber(ARGV[2])
local member = ARGV[3]
local now = tonumber(ARGV[4])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

redis.call('ZREMRANGEBYSCORE', log, 0, now - window)
local count = redis.call('ZCARD', log)
if count >= max_requests then
  local oldest = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
  return {0, count, tonumber(oldest[2]) + window - now}
end
redis.call('ZADD', log, now, member)
redis.call('PEXPIRE', log, window)
return {1, count + 1, 0}
