-- One exchange of one replica with the fleet's health board (board.go), with the semantics of
-- health.FleetBoard: ARGV[1] the key prefix, ARGV[2] now (ms, the caller's clock, as the board's
-- rules are), ARGV[3] the sync interval (ms), ARGV[4] the replica, ARGV[5] the exchange as JSON.
-- The store keeps per-key running sums of the reports (s:KEY), moved by each report's change,
-- and per-key sorted sets for the tops, so that the reply per key does not grow with the
-- replicas: its sums, the tops among the other replicas and a Complete flag. Go subtracts the
-- caller's own report from the sums. TTLs only collect garbage: every rule compares the times
-- stored with now.
local p, now, iv, me = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local m = cjson.decode(ARGV[5])
local limit = now - 3 * iv
local keep = 6 * iv
-- Every structure of one key (sums, reports, sorted sets) gets the same deadline whenever it is
-- touched, so that they expire together and a sum never outlives the reports it adds up.
local ttl = keep + 60000
-- Top scores pack two counts in one double: more evidence first, then fewer requests (samples);
-- exact while the second stays under 2^26 and the product under 2^53.
local M = 67108864
-- Numbers go to Redis as '%.0f' strings: Lua's default '%.14g' would round large scores.
local function num(x) return string.format('%.0f', x) end
local zs = {'fz', 'tz', 'slz', 'stz', 'ssz', 'lsz'}
local zero = {q = 0, f = 0, t = 0, st = 0, ev = 0, sl = 0, sa = 0, b = {}, ss = 0, ls = 0}

-- scores of one stored report in the sorted sets zs (nil: not a member).
local function scores(e)
  local s = {}
  if e.f > 0 then s[1] = e.f * M - math.min(e.q, M - 1) end
  if e.t > 0 then s[2] = e.t * M - math.min(e.q, M - 1) end
  if e.sl > 0 then s[3] = e.sl * M - math.min(e.sa, M - 1) end
  if e.st > 0 then s[4] = e.st end
  if e.st > 0 and e.ss > 0 then s[5] = e.ss end
  if e.ls > 0 then s[6] = e.ls end
  return s
end

-- apply replaces rep's report of k (old, nil if none) with new (nil: none), moving the key's
-- sums by the difference: the reply then reads one sum per key, whatever the replica count.
local function apply(k, rep, old, new, blob)
  local s = p .. 's:' .. k
  local o, n = old or zero, new or zero
  local function d(f, a, b) if a ~= b then redis.call('HINCRBY', s, f, num(b - a)) end end
  d('n', old and 1 or 0, new and 1 or 0)
  d('q', o.q, n.q); d('f', o.f, n.f); d('t', o.t, n.t); d('st', o.st, n.st); d('ev', o.ev, n.ev)
  for i = 1, math.max(#o.b, #n.b) do d('b' .. i, o.b[i] or 0, n.b[i] or 0) end
  local sc = new and scores(new) or {}
  local names = {s, p .. 'r:' .. k}
  for i, z in ipairs(zs) do
    local zk = p .. z .. ':' .. k
    names[#names + 1] = zk
    if sc[i] then redis.call('ZADD', zk, num(sc[i]), rep) elseif old then redis.call('ZREM', zk, rep) end
  end
  if new then redis.call('HSET', p .. 'r:' .. k, rep, blob) else redis.call('HDEL', p .. 'r:' .. k, rep) end
  if tonumber(redis.call('HGET', s, 'n') or '0') <= 0 then
    redis.call('DEL', unpack(names))
    redis.call('SREM', p .. 'keys', k)
  else
    redis.call('SADD', p .. 'keys', k)
    for _, x in ipairs(names) do redis.call('PEXPIRE', x, ttl) end
  end
end

-- expire: verdicts, leases, Retry-Afters, reports, replicas, evidence.
for _, k in ipairs(redis.call('SMEMBERS', p .. 'vk')) do
  local u = tonumber(redis.call('HGET', p .. 'v:' .. k, 'until'))
  if not u or now >= u then redis.call('DEL', p .. 'v:' .. k); redis.call('SREM', p .. 'vk', k) end
end
local leases = redis.call('HGETALL', p .. 'leases')
for i = 1, #leases, 2 do
  local holder, u = string.match(leases[i + 1], '^(.*)|(%-?%d+)$')
  if now > tonumber(u) then redis.call('HDEL', p .. 'leases', leases[i]) end
end
local retry = redis.call('HGETALL', p .. 'retry')
for i = 1, #retry, 2 do
  if now >= tonumber(retry[i + 1]) then redis.call('HDEL', p .. 'retry', retry[i]) end
end
-- replicas that have not exchanged for 3 intervals: their reports leave the sums now.
for _, r in ipairs(redis.call('ZRANGEBYSCORE', p .. 'seen', '-inf', '(' .. num(limit))) do
  for _, k in ipairs(redis.call('SMEMBERS', p .. 'rk:' .. r)) do
    local b = redis.call('HGET', p .. 'r:' .. k, r)
    if b then apply(k, r, cjson.decode(b), nil) end
  end
  redis.call('DEL', p .. 'rk:' .. r)
  redis.call('ZREM', p .. 'seen', r); redis.call('ZREM', p .. 'prevz', r)
end
-- evidence ends when no report carries any.
for _, k in ipairs(redis.call('HKEYS', p .. 'ev')) do
  if tonumber(redis.call('HGET', p .. 's:' .. k, 'ev') or '0') <= 0 then redis.call('HDEL', p .. 'ev', k) end
end

-- proposals: NX when prev is 0, else compare-and-set on the held version.
for _, v in ipairs(m.props or {}) do
  local key = p .. 'v:' .. v.k
  if v['until'] > now then
    local held = redis.call('HGET', key, 'ver')
    if (v.prev == 0 and not held) or (v.prev ~= 0 and held and tonumber(held) == v.prev) then
      local ver = redis.call('INCR', p .. 'ver:' .. v.k)
      redis.call('DEL', key)
      redis.call('HSET', key, 'blob', v.blob, 'until', v['until'], 'ver', ver, 'by', me)
      redis.call('PEXPIRE', key, v['until'] - now + keep)
      redis.call('SADD', p .. 'vk', v.k)
    end
  end
end

-- this replica's reports: Retry-After ends, probe leases, the reports themselves.
for _, r in ipairs(m.ra or {}) do
  local cur = tonumber(redis.call('HGET', p .. 'retry', r[1]) or '0')
  if r[2] > now and r[2] > cur then redis.call('HSET', p .. 'retry', r[1], r[2]) end
end
local wants = {}
for _, k in ipairs(m.lease or {}) do
  wants[k] = true
  local l = redis.call('HGET', p .. 'leases', k)
  -- two intervals, as health's FleetBoard (leaseIntervals): a renewal a little late keeps it.
  if not l or string.match(l, '^(.*)|') == me then redis.call('HSET', p .. 'leases', k, me .. '|' .. (now + 2 * iv)) end
end
leases = redis.call('HGETALL', p .. 'leases')
for i = 1, #leases, 2 do
  if string.match(leases[i + 1], '^(.*)|') == me and not wants[leases[i]] then redis.call('HDEL', p .. 'leases', leases[i]) end
end
local mine = {}
for _, r in ipairs(m.reps or {}) do mine[r.k] = r.c end
for _, k in ipairs(redis.call('SMEMBERS', p .. 'rk:' .. me)) do
  if not mine[k] then
    local b = redis.call('HGET', p .. 'r:' .. k, me)
    if b then apply(k, me, cjson.decode(b), nil) end
  end
end
redis.call('DEL', p .. 'rk:' .. me)
for k, c in pairs(mine) do
  local b = redis.call('HGET', p .. 'r:' .. k, me)
  apply(k, me, b and cjson.decode(b) or nil, cjson.decode(c), c)
  redis.call('SADD', p .. 'rk:' .. me, k)
end
-- rk outlives the key structures it names by the fade-out, so a stale replica's reports are
-- always found to be subtracted.
redis.call('PEXPIRE', p .. 'rk:' .. me, ttl + 3 * iv)
redis.call('ZADD', p .. 'prevz', redis.call('ZSCORE', p .. 'seen', me) or '0', me)
redis.call('ZADD', p .. 'seen', num(now), me)
for _, k in ipairs(m.evk or {}) do redis.call('HSETNX', p .. 'ev', k, num(now)) end
for _, h in ipairs({'leases', 'retry', 'seen', 'prevz', 'ev', 'keys'}) do redis.call('PEXPIRE', p .. h, ttl) end

-- the reply: per key, its sums and the other replicas' tops, O(1) in the replica count.
local function hash(name)
  local t, kv = {}, redis.call('HGETALL', p .. name)
  for i = 1, #kv, 2 do t[kv[i]] = kv[i + 1] end
  return t
end
local out = {k = {}, v = {}, c = {}}
out.leases, out.retry = hash('leases'), hash('retry')
-- Complete: every replica's exchange before its last came after the key's evidence appeared.
local mp = redis.call('ZRANGE', p .. 'prevz', 0, 0, 'WITHSCORES')
local minprev = tonumber(mp[2] or '0')
for k, since in pairs(hash('ev')) do
  if minprev > tonumber(since) then out.c[k] = true end
end
for _, k in ipairs(redis.call('SMEMBERS', p .. 'keys')) do
  -- the first of the top two members that is not the caller: the best among the others.
  local function other(z, rev)
    local r = redis.call(rev and 'ZREVRANGE' or 'ZRANGE', p .. z .. ':' .. k, 0, 1, 'WITHSCORES')
    for i = 1, #r, 2 do if r[i] ~= me then return r[i], r[i + 1] end end
  end
  local e = {s = redis.call('HGETALL', p .. 's:' .. k)}
  local who = other('fz', true)
  if who then e.tf = redis.call('HGET', p .. 'r:' .. k, who) end
  who = other('tz', true)
  if who then e.tt = redis.call('HGET', p .. 'r:' .. k, who) end
  who = other('slz', true)
  if who then e.tsl = redis.call('HGET', p .. 'r:' .. k, who) end
  local _, x = other('stz', true)
  e.tst = x
  _, x = other('ssz', false)
  e.ss = x
  _, x = other('lsz', true)
  e.ls = x
  out.k[k] = e
end
for _, k in ipairs(redis.call('SMEMBERS', p .. 'vk')) do
  local h = redis.call('HMGET', p .. 'v:' .. k, 'blob', 'ver', 'by')
  if h[1] then out.v[k] = {blob = h[1], ver = tonumber(h[2]), by = h[3]} end
end
return cjson.encode(out)
