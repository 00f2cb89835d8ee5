/**
 * The Lua scripts of the Redis backend: every atomic read-modify-write; the
 * key layout is in docs/design/store-and-replicas.md.
 */

/** Shared helpers prepended to every script. */
const LIB = `
local P = ARGV[1]
local function num(v, d) if v then return tonumber(v) end return d end
local function fmt(n) return string.format('%.17g', n) end
local function task_unindex(id, i)
  redis.call('ZREM', P .. 'ts:' .. i.s, id)
  redis.call('ZREM', P .. 'tact', id)
  redis.call('ZREM', P .. 'tend:' .. i.k .. ':' .. i.s, id)
  redis.call('ZREM', P .. 'tret', id)
  if i.u then
    local f = i.s .. '\\0' .. i.v .. '\\0' .. i.u
    if redis.call('HGET', P .. 'tup', f) == id then redis.call('HDEL', P .. 'tup', f) end
  end
end
local function task_index(id, i)
  redis.call('ZADD', P .. 'ts:' .. i.s, 0, id)
  if i.a then redis.call('ZADD', P .. 'tact', 0, id)
  else redis.call('ZADD', P .. 'tend:' .. i.k .. ':' .. i.s, fmt(i.lu), id) end
  if i.ru then redis.call('ZADD', P .. 'tret', fmt(i.ru), id) end
  if i.u then redis.call('HSET', P .. 'tup', i.s .. '\\0' .. i.v .. '\\0' .. i.u, id) end
end
local function task_delete(id)
  local key = P .. 't:' .. id
  local raw = redis.call('HGET', key, 'i')
  if not raw then return nil end
  local i = cjson.decode(raw)
  task_unindex(id, i)
  redis.call('DEL', key)
  return i
end
local function pending_delete(id)
  local key = P .. 'p:' .. id
  local v = redis.call('HMGET', key, 'r', 's')
  if not v[1] then return nil end
  redis.call('DEL', key)
  redis.call('ZREM', P .. 'ps:' .. v[2], id)
  redis.call('ZREM', P .. 'pall', id)
  redis.call('ZREM', P .. 'pexp', id)
  return v[1]
end
local function event_drop_front(sid, n, reason)
  local m = P .. 'em:' .. sid
  local ev = P .. 'ev:' .. sid
  local eix = P .. 'eix:' .. sid
  local meta = redis.call('HMGET', m, 'f', 'nx', 'd')
  local f, nx, d = num(meta[1], 1), num(meta[2], 1), num(meta[3], 0)
  local last = math.min(f + n - 1, nx - 1)
  local count, und = 0, 0
  for seq = f, last do
    local v = redis.call('HGET', ev, seq)
    if v then
      local id = string.sub(v, 1, string.find(v, '\\n', 1, true) - 1)
      if redis.call('HGET', eix, id) == tostring(seq) then redis.call('HDEL', eix, id) end
      redis.call('HDEL', ev, seq)
    end
    redis.call('ZREM', P .. 'eg', sid .. '\\n' .. seq)
    count = count + 1
    if seq > d then und = und + 1 end
  end
  if count > 0 then
    redis.call('HSET', m, 'f', last + 1)
    redis.call('HINCRBY', m, reason == 'session' and 'es' or 'eg', und)
  end
  return { sid, reason, count, und }
end
local function event_range(sid, from, to, out)
  local ev = P .. 'ev:' .. sid
  for seq = from, to do
    local v = redis.call('HGET', ev, seq)
    if v then table.insert(out, seq); table.insert(out, v) end
  end
  return out
end
`;

/** name → script body (after LIB); each takes ARGV[1] = prefix and no KEYS. */
const BODIES = {
  /** ARGV: P, id, mode ("create" | "cas"), expected version, record JSON, index JSON → 1 written, 0 conflict, -1 exists. */
  taskWrite: `
local id, mode, expected = ARGV[2], ARGV[3], ARGV[4]
local key = P .. 't:' .. id
local cur = redis.call('HMGET', key, 'n', 'i')
if mode == 'create' then
  if cur[1] then return -1 end
elseif cur[1] ~= expected then return 0 end
if cur[2] then task_unindex(id, cjson.decode(cur[2])) end
redis.call('HSET', key, 'r', ARGV[5], 'i', ARGV[6], 'n', num(cur[1], 0) + 1)
task_index(id, cjson.decode(ARGV[6]))
return 1`,
  /** ARGV: P, id → 1 deleted, 0 none. */
  taskDelete: `
if task_delete(ARGV[2]) then return 1 end
return 0`,
  /** ARGV: P, session, afterTaskId|"", kind|"", server|"", ",s1,s2,"|"", limit (-1: none) → record JSONs. */
  taskList: `
local sid, after, kind, server, statuses, limit = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local ids
if after == '' then ids = redis.call('ZRANGE', P .. 'ts:' .. sid, 0, -1)
else ids = redis.call('ZRANGEBYLEX', P .. 'ts:' .. sid, '(' .. after, '+') end
local out = {}
for _, id in ipairs(ids) do
  if limit >= 0 and #out >= limit then break end
  local v = redis.call('HMGET', P .. 't:' .. id, 'r', 'i')
  if v[1] then
    local i = cjson.decode(v[2])
    if (kind == '' or i.k == kind) and (server == '' or i.v == server)
      and (statuses == '' or string.find(statuses, ',' .. i.st .. ',', 1, true)) then
      table.insert(out, v[1])
    end
  end
end
return out`,
  /** ARGV: P → record JSONs of working tasks, taskId order. */
  taskWorking: `
local out = {}
for _, id in ipairs(redis.call('ZRANGE', P .. 'tact', 0, -1)) do
  local r = redis.call('HGET', P .. 't:' .. id, 'r')
  if r then table.insert(out, r) end
end
return out`,
  /** ARGV: P, "session\\0server\\0upstreamTaskId" → record JSON or nil. */
  taskByUpstream: `
local id = redis.call('HGET', P .. 'tup', ARGV[2])
if not id then return false end
return redis.call('HGET', P .. 't:' .. id, 'r')`,
  /** ARGV: P, now → flat [taskId, sessionId, …]. */
  taskDeleteExpired: `
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'tret', '-inf', ARGV[2])) do
  local i = task_delete(id)
  if i then table.insert(out, id); table.insert(out, i.s) end
end
return out`,
  /** ARGV: P, session → count deleted. */
  taskDeleteSession: `
local n = 0
for _, id in ipairs(redis.call('ZRANGE', P .. 'ts:' .. ARGV[2], 0, -1)) do
  if task_delete(id) then n = n + 1 end
end
return n`,
  /** ARGV: P, session, kind, maxCount, maxBytes, keep|"" → deleted ids (the rule of policy.retentionVictims). */
  taskRetention: `
local sid, kind, maxCount, maxBytes, keep = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local ids = redis.call('ZRANGE', P .. 'tend:' .. kind .. ':' .. sid, 0, -1)
local bytes, count = {}, #ids
local total = 0
for n, id in ipairs(ids) do
  local raw = redis.call('HGET', P .. 't:' .. id, 'i')
  bytes[n] = raw and (cjson.decode(raw).b or 0) or 0
  total = total + bytes[n]
end
local victims = {}
for n, id in ipairs(ids) do
  if count <= maxCount and total <= maxBytes then break end
  if id ~= keep then
    table.insert(victims, id)
    count = count - 1
    total = total - bytes[n]
  end
end
for _, id in ipairs(victims) do task_delete(id) end
return victims`,

  /** ARGV: P, id, expected version|"" (put: any), record JSON, lastActivityAt → 1 written, 0 conflict or (update) gone. */
  sessionWrite: `
local key = P .. 's:' .. ARGV[2]
local n = redis.call('HGET', key, 'n')
if ARGV[3] ~= '' and n ~= ARGV[3] then return 0 end
redis.call('HSET', key, 'r', ARGV[4], 'n', num(n, 0) + 1)
redis.call('ZADD', P .. 'sidle', ARGV[5], ARGV[2])
return 1`,
  /** ARGV: P, id → 1 deleted, 0 none. */
  sessionDelete: `
redis.call('ZREM', P .. 'sidle', ARGV[2])
return redis.call('DEL', P .. 's:' .. ARGV[2])`,
  /** ARGV: P, idleBefore, limit (-1: none) → record JSONs, least recently active first. */
  sessionExpired: `
local ids
if tonumber(ARGV[3]) < 0 then ids = redis.call('ZRANGEBYSCORE', P .. 'sidle', '-inf', '(' .. ARGV[2])
else ids = redis.call('ZRANGEBYSCORE', P .. 'sidle', '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[3]) end
local out = {}
for _, id in ipairs(ids) do
  local r = redis.call('HGET', P .. 's:' .. id, 'r')
  if r then table.insert(out, r) end
end
return out`,

  /** ARGV: P, requestId, session, createdAt, expiresAt, record JSON. */
  pendingPut: `
pending_delete(ARGV[2])
redis.call('HSET', P .. 'p:' .. ARGV[2], 'r', ARGV[6], 's', ARGV[3])
redis.call('ZADD', P .. 'ps:' .. ARGV[3], ARGV[4], ARGV[2])
redis.call('ZADD', P .. 'pall', ARGV[4], ARGV[2])
redis.call('ZADD', P .. 'pexp', ARGV[5], ARGV[2])
return 1`,
  /** ARGV: P, requestId → 1 for the one caller that deleted it. */
  pendingDelete: `
if pending_delete(ARGV[2]) then return 1 end
return 0`,
  /** ARGV: P, zset suffix ("ps:<session>" or "pall") → record JSONs, oldest first. */
  pendingList: `
local out = {}
for _, id in ipairs(redis.call('ZRANGE', P .. ARGV[2], 0, -1)) do
  local r = redis.call('HGET', P .. 'p:' .. id, 'r')
  if r then table.insert(out, r) end
end
return out`,
  /** ARGV: P, now → deleted record JSONs. */
  pendingDeleteExpired: `
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'pexp', '-inf', ARGV[2])) do
  local r = pending_delete(id)
  if r then table.insert(out, r) end
end
return out`,
  /** ARGV: P, session → count deleted. */
  pendingDeleteSession: `
local n = 0
for _, id in ipairs(redis.call('ZRANGE', P .. 'ps:' .. ARGV[2], 0, -1)) do
  if pending_delete(id) then n = n + 1 end
end
return n`,

  /**
   * ARGV: P, session, event id, event JSON, maxPerSession, session batch,
   * maxTotal, gateway batch → { seq, sid, reason, count, undelivered, … }.
   */
  eventAppend: `
local sid, id = ARGV[2], ARGV[3]
local maxPer, perBatch, maxTotal, totalBatch = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local m = P .. 'em:' .. sid
if redis.call('EXISTS', m) == 0 then redis.call('HSET', m, 'nx', 1, 'f', 1, 'd', 0, 'es', 0, 'eg', 0) end
local out = { 0 }
local meta = redis.call('HMGET', m, 'f', 'nx')
if tonumber(meta[2]) - tonumber(meta[1]) >= maxPer then
  for _, x in ipairs(event_drop_front(sid, perBatch, 'session')) do table.insert(out, x) end
end
if redis.call('ZCARD', P .. 'eg') >= maxTotal then
  local owners, shares = {}, {}
  for _, member in ipairs(redis.call('ZRANGE', P .. 'eg', 0, totalBatch - 1)) do
    local owner = string.match(member, '^(.*)\\n%d+$')
    if shares[owner] == nil then table.insert(owners, owner); shares[owner] = 0 end
    shares[owner] = shares[owner] + 1
  end
  for _, owner in ipairs(owners) do
    for _, x in ipairs(event_drop_front(owner, shares[owner], 'gateway')) do table.insert(out, x) end
  end
end
local seq = tonumber(redis.call('HGET', m, 'nx'))
redis.call('HSET', P .. 'ev:' .. sid, seq, id .. '\\n' .. ARGV[4])
redis.call('HSET', P .. 'eix:' .. sid, id, seq)
redis.call('ZADD', P .. 'eg', redis.call('INCR', P .. 'egseq'), sid .. '\\n' .. seq)
redis.call('HSET', m, 'nx', seq + 1)
out[1] = seq
return out`,
  /**
   * ARGV: P, session, mode ("undelivered" | "after" | "list"), cursor id|"" →
   * { evictedSession, evictedGateway, found, seq, "id\\nJSON", … }; "list" marks nothing.
   */
  eventRead: `
local sid, mode, cursor = ARGV[2], ARGV[3], ARGV[4]
local m = P .. 'em:' .. sid
local meta = redis.call('HMGET', m, 'f', 'nx', 'd', 'es', 'eg')
if not meta[1] then return { 0, 0, 0 } end
local f, nx, d = tonumber(meta[1]), tonumber(meta[2]), tonumber(meta[3])
local found, from = 0, f
if mode == 'undelivered' then from = math.max(d + 1, f)
elseif cursor ~= '' then
  local c = redis.call('HGET', P .. 'eix:' .. sid, cursor)
  if c then found = 1; from = math.max(tonumber(c) + 1, f) end
end
local out = { 0, 0, found }
if mode ~= 'list' then
  out[1], out[2] = tonumber(meta[4]), tonumber(meta[5])
  redis.call('HSET', m, 'd', nx - 1, 'es', 0, 'eg', 0)
end
return event_range(sid, from, nx - 1, out)`,
  /** ARGV: P, session → { count, undelivered, evictedSession, evictedGateway, last "id\\nJSON"|false }. */
  eventStats: `
local sid = ARGV[2]
local meta = redis.call('HMGET', P .. 'em:' .. sid, 'f', 'nx', 'd', 'es', 'eg')
if not meta[1] then return { 0, 0, 0, 0, false } end
local f, nx, d = tonumber(meta[1]), tonumber(meta[2]), tonumber(meta[3])
local last = false
if nx > f then last = redis.call('HGET', P .. 'ev:' .. sid, nx - 1) end
return { nx - f, (nx - 1) - math.max(d, f - 1), tonumber(meta[4]), tonumber(meta[5]), last }`,
  /** ARGV: P, session → count deleted. */
  eventDeleteSession: `
local sid = ARGV[2]
local m = P .. 'em:' .. sid
local meta = redis.call('HMGET', m, 'f', 'nx')
if not meta[1] then return 0 end
local f, nx = tonumber(meta[1]), tonumber(meta[2])
for seq = f, nx - 1 do redis.call('ZREM', P .. 'eg', sid .. '\\n' .. seq) end
redis.call('DEL', m, P .. 'ev:' .. sid, P .. 'eix:' .. sid)
return nx - f`,

  /** ARGV: P, session, stream id, message JSON, maxEvents, maxBytes → the message's seq. */
  replayAppend: `
local sid, stream, json, maxEvents, maxBytes = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local m, rv, rs = P .. 'rm:' .. sid, P .. 'rv:' .. sid, P .. 'rs:' .. sid
local meta = redis.call('HMGET', m, 'nx', 'f', 'c', 'b')
local nx, f, c, b = num(meta[1], 1), num(meta[2], 1), num(meta[3], 0), num(meta[4], 0)
local seq = nx
redis.call('HSET', rv, seq, json)
redis.call('HSET', rs, seq, stream)
c = c + 1
b = b + #json
while c > maxEvents or (b > maxBytes and c > 1) do
  local old = redis.call('HGET', rv, f)
  if old then b = b - #old; c = c - 1 end
  redis.call('HDEL', rv, f)
  redis.call('HDEL', rs, f)
  f = f + 1
end
redis.call('HSET', m, 'nx', seq + 1, 'f', f, 'c', c, 'b', b)
return seq`,
  /** ARGV: P, session, event id → { streamId, seq, JSON, … } or false when the id is unknown. */
  replayAfter: `
local sid, from = ARGV[2], tonumber(ARGV[3])
local rs = P .. 'rs:' .. sid
local stream = redis.call('HGET', rs, ARGV[3])
if not stream then return false end
local nx = num(redis.call('HGET', P .. 'rm:' .. sid, 'nx'), 1)
local out = { stream }
for seq = from + 1, nx - 1 do
  if redis.call('HGET', rs, seq) == stream then
    table.insert(out, seq)
    table.insert(out, redis.call('HGET', P .. 'rv:' .. sid, seq))
  end
end
return out`,
  /** ARGV: P, session, stream id, after seq → { keptFrom, seq, JSON, … } (the stream's messages after that seq). */
  replayStream: `
local sid, stream, after = ARGV[2], ARGV[3], tonumber(ARGV[4])
local meta = redis.call('HMGET', P .. 'rm:' .. sid, 'f', 'nx')
local f, nx = num(meta[1], 1), num(meta[2], 1)
local rs = P .. 'rs:' .. sid
local out = { f }
for seq = math.max(f, after + 1), nx - 1 do
  if redis.call('HGET', rs, seq) == stream then
    table.insert(out, seq)
    table.insert(out, redis.call('HGET', P .. 'rv:' .. sid, seq))
  end
end
return out`,
  /** ARGV: P, session → count deleted. */
  replayDeleteSession: `
local sid = ARGV[2]
local c = num(redis.call('HGET', P .. 'rm:' .. sid, 'c'), 0)
redis.call('DEL', P .. 'rm:' .. sid, P .. 'rv:' .. sid, P .. 'rs:' .. sid)
return c`,

  /** ARGV: P, now → count deleted. Started console logins: 'l:<state>' (record JSON), 'lexp' (state by expiresAt). */
  loginDeleteExpired: `
local gone = redis.call('ZRANGEBYSCORE', P .. 'lexp', '-inf', ARGV[2])
for _, state in ipairs(gone) do redis.call('DEL', P .. 'l:' .. state) end
redis.call('ZREMRANGEBYSCORE', P .. 'lexp', '-inf', ARGV[2])
return #gone`,
  /** ARGV: P, state, now, expiresAt, record JSON, max → 1. The ones that expire first make room when max are kept. */
  loginPut: `
for _, state in ipairs(redis.call('ZRANGEBYSCORE', P .. 'lexp', '-inf', ARGV[3])) do redis.call('DEL', P .. 'l:' .. state) end
redis.call('ZREMRANGEBYSCORE', P .. 'lexp', '-inf', ARGV[3])
redis.call('ZREM', P .. 'lexp', ARGV[2])
local over = redis.call('ZCARD', P .. 'lexp') - tonumber(ARGV[6]) + 1
if over > 0 then
  for _, state in ipairs(redis.call('ZRANGE', P .. 'lexp', 0, over - 1)) do redis.call('DEL', P .. 'l:' .. state) end
  redis.call('ZREMRANGEBYRANK', P .. 'lexp', 0, over - 1)
end
redis.call('SET', P .. 'l:' .. ARGV[2], ARGV[5])
redis.call('ZADD', P .. 'lexp', ARGV[4], ARGV[2])
return 1`,
  /** ARGV: P, state, now → the record JSON for the one caller that took it, unexpired; false otherwise. */
  loginTake: `
local key = P .. 'l:' .. ARGV[2]
local r = redis.call('GET', key)
if not r then return false end
local expires = tonumber(redis.call('ZSCORE', P .. 'lexp', ARGV[2]))
redis.call('DEL', key)
redis.call('ZREM', P .. 'lexp', ARGV[2])
if expires and expires <= tonumber(ARGV[3]) then return false end
return r`,
  /** ARGV: P, lease key, holder, ttl ms → 1 extended to ttl from now, 0 not held by them (lapsed, taken). */
  leaseRenew: `
local key = P .. 'ls:' .. ARGV[2]
if redis.call('GET', key) ~= ARGV[3] then return 0 end
redis.call('PEXPIRE', key, ARGV[4])
return 1`,
  /** ARGV: P, lease key, holder → 1 released, 0 not held by them. */
  leaseRelease: `
local key = P .. 'ls:' .. ARGV[2]
if redis.call('GET', key) ~= ARGV[3] then return 0 end
redis.call('DEL', key)
return 1`,
  /** ARGV: P, credential hash (full key), field, expected sealed, record JSON → 1 when replaced (the stored one was still sealed as expected), else 0. */
  credentialReplaceIf: `
local r = redis.call('HGET', ARGV[2], ARGV[3])
if not r or cjson.decode(r).sealed ~= ARGV[4] then return 0 end
redis.call('HSET', ARGV[2], ARGV[3], ARGV[5])
return 1`,
  // Token buckets (src/store/token-bucket.ts has the same arithmetic): all or nothing; returns {ok, refused index (0-based), retry ms}.
  rateTake: `
local now = tonumber(ARGV[2])
local specs = cjson.decode(ARGV[3])
local tokens = {}
local refused, wait = -1, 0
for i, s in ipairs(specs) do
  local cap, rate = s[2], s[3]
  local v = redis.call('HMGET', P .. 'rl:' .. s[1], 't', 'a')
  local t = cap
  if v[1] then t = math.min(cap, tonumber(v[1]) + math.max(0, now - tonumber(v[2])) * rate / 1000) end
  tokens[i] = t
  if t < 1 then
    if refused < 0 then refused = i - 1 end
    wait = math.max(wait, math.max(1, math.ceil((1 - t) * 1000 / rate)))
  end
end
if refused >= 0 then return {0, refused, wait} end
for i, s in ipairs(specs) do
  local key = P .. 'rl:' .. s[1]
  local t = tokens[i] - 1
  redis.call('HSET', key, 't', fmt(t), 'a', fmt(now))
  redis.call('PEXPIRE', key, math.ceil((s[2] - t) * 1000 / s[3]) + 1000)
end
return {1, 0, 0}`,
} as const;

export type ScriptName = keyof typeof BODIES;

/** name → full Lua source. */
export const SCRIPTS: Readonly<Record<ScriptName, string>> = Object.fromEntries(Object.entries(BODIES).map(([name, body]) => [name, LIB + body])) as Record<
  ScriptName,
  string
>;
