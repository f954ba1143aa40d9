-- Runs once in every fresh Lua state of the node, with the debug library
-- still loaded; receives the table of Rust functions ("bridge") and
-- builds the `redis` table, the error handler and the read-only globals.
local bridge = ...
local getinfo = debug.getinfo
local type, tostring, error, select = type, tostring, error, select
local pairs, setmetatable, rawset = pairs, setmetatable, rawset
local setmt = setmetatable
local sub, find, gsub, lower = string.sub, string.find, string.gsub, string.lower
local xpcall, tonumber, concat = xpcall, tonumber, table.concat

-- Where an error was raised: the first frame that is neither a C function
-- nor this file, as Redis's __redis__err__handler reports it.
bridge.handler = function(err)
  local killed = bridge.killed()
  if killed then err = {err = killed} end
  local level, i = 2, nil
  while true do
    i = getinfo(level, 'nSl')
    if not i or (i.what ~= 'C' and i.what ~= 'tail' and i.source ~= '=redis') then break end
    level = level + 1
  end
  if type(err) == 'userdata' then
    -- A library function's error: luaL_error puts the caller's position first.
    local where = i and i.currentline > 0 and (i.short_src .. ':' .. i.currentline .. ': ') or ''
    err = where .. bridge.errmsg(err)
  end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if i then err.source = i.source; err.line = i.currentline end
  return err
end

local unpack = unpack
bridge.run = function(f, ...)
  local n, args = select('#', ...), {...}
  if n == 0 then return xpcall(f, bridge.handler) end
  return xpcall(function() return f(unpack(args, 1, n)) end, bridge.handler)
end

local function fail(msg) return false, {err = msg} end

-- An error reply text as Redis stores it in the `err` field: "CODE msg".
local function error_text(e)
  if sub(e, 1, 1) == '-' then
    local sp = find(e, ' ', 1, true)
    local msg
    if sp then e, msg = sub(e, 2, sp - 1), sub(e, sp + 1) else e, msg = 'ERR', sub(e, 2) end
    return e .. ' ' .. gsub(gsub(msg, '^[\r\n]+', ''), '[\r\n]+$', '')
  end
  return 'ERR ' .. gsub(gsub(e, '^[\r\n]+', ''), '[\r\n]+$', '')
end

local redis = {}
-- The raising functions: Rust puts C functions named `c_<name>` in the
-- bridge that call these and raise the error table they return.
-- The arguments travel as one table: a Rust callback takes few values.
bridge.impl_call = function(...) return bridge.call(true, {n = select('#', ...), ...}) end
redis.pcall = function(...)
  local _, v = bridge.call(false, {n = select('#', ...), ...})
  return v
end
redis.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if sub(e, 1, 1) ~= '-' then e = '-' .. e end
  return {err = error_text(e)}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
bridge.impl_sha1hex = function(...)
  if select('#', ...) ~= 1 then return fail('ERR wrong number of arguments') end
  local s = ...
  if type(s) == 'number' then s = tostring(s) elseif type(s) ~= 'string' then s = '' end
  return true, bridge.sha1hex(s)
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
bridge.impl_log = function(...)
  local n = select('#', ...)
  if n < 2 then return fail('ERR redis.log() requires two arguments or more.') end
  local level = ...
  if type(level) ~= 'number' then return fail('ERR First argument must be a number (log level).') end
  if level < 0 or level > 3 then return fail('ERR Invalid debug level.') end
  local parts = {}
  for j = 2, n do
    local v = select(j, ...)
    if type(v) == 'string' or type(v) == 'number' then parts[#parts + 1] = tostring(v) end
  end
  bridge.log(level, concat(parts, ' '))
  return true
end
bridge.impl_setresp = function(...)
  if select('#', ...) ~= 1 then return fail('ERR redis.setresp() requires one argument.') end
  local v = tonumber((...))
  if v ~= 2 and v ~= 3 then return fail('ERR RESP version must be 2 or 3.') end
  bridge.setresp(v)
  return true
end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
bridge.impl_set_repl = function(...)
  if select('#', ...) ~= 1 then return fail('ERR redis.set_repl() requires one argument.') end
  local v = tonumber((...))
  if not v or v < 0 or v > 3 or v % 1 ~= 0 then
    return fail('ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
  return true
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
bridge.impl_acl_check_cmd = function(...)
  if select('#', ...) < 1 then return fail('ERR Please specify at least one argument for this redis lib call') end
  if not bridge.known((...)) then return fail('ERR Invalid command passed to redis.acl_check_cmd()') end
  return true, true
end
for _, name in pairs({'call', 'sha1hex', 'log', 'setresp', 'set_repl', 'acl_check_cmd'}) do
  redis[name] = bridge['c_' .. name]
end
redis.REDIS_VERSION = bridge.version
redis.REDIS_VERSION_NUM = bridge.version_num
rawset(_G, 'redis', redis)

-- Redis's pcall: an error table raised by redis.call and friends comes
-- back as its `err` text.
local raw_pcall = pcall
local function pcall_result(ok, ...)
  if ok then return true, ... end
  -- A script stopped for running too long cannot catch its way out.
  local killed = bridge.killed()
  if killed then error({err = killed}) end
  local e = ...
  if type(e) == 'table' and type(e.err) == 'string' then e = e.err end
  if type(e) == 'userdata' then
    local i = getinfo(3, 'Sl')
    local where = i and i.currentline > 0 and (i.short_src .. ':' .. i.currentline .. ': ') or ''
    e = where .. bridge.errmsg(e)
  end
  return false, e
end
rawset(_G, 'pcall', function(f, ...) return pcall_result(raw_pcall(f, ...)) end)
local raw_xpcall = xpcall
rawset(_G, 'xpcall', function(f, h)
  return (function(ok, ...)
    if not ok then
      local killed = bridge.killed()
      if killed then error({err = killed}) end
    end
    return ok, ...
  end)(raw_xpcall(f, h))
end)
rawset(_G, '__redis__err__handler', bridge.handler)

-- Redis refuses binary chunks.
local raw_loadstring = loadstring
rawset(_G, 'loadstring', function(s, ...)
  if type(s) == 'string' and sub(s, 1, 1) == '\27' then return nil, 'binary chunks are not allowed' end
  return raw_loadstring(s, ...)
end)

-- Only what Redis 7.0 leaves to scripts.
local allowed = {
  _G = 1, _VERSION = 1, __redis__err__handler = 1, assert = 1, collectgarbage = 1, error = 1, gcinfo = 1,
  getmetatable = 1, ipairs = 1, load = 1, loadstring = 1, next = 1, pairs = 1,
  pcall = 1, rawequal = 1, rawget = 1, rawset = 1, select = 1, setmetatable = 1,
  tonumber = 1, tostring = 1, type = 1, unpack = 1, xpcall = 1,
  bit = 1, cjson = 1, cmsgpack = 1, coroutine = 1, math = 1, redis = 1,
  string = 1, struct = 1, table = 1,
}
for k in pairs(_G) do
  if not allowed[k] then rawset(_G, k, nil) end
end

-- Makes `t` read-only: its entries move to a hidden table it reads
-- through; `missing` (if given) answers a read of an absent key.
local backings = setmetatable({}, {__mode = 'k'})
local function readonly() error('Attempt to modify a readonly table', 2) end
-- What getmetatable() shows of a read-only table: itself read-only.
local shown = setmetatable({}, {__newindex = readonly, __metatable = false})
local function lock(t, missing)
  local backing = {}
  backings[t] = backing
  for k, v in pairs(t) do backing[k] = v end
  for k in pairs(backing) do rawset(t, k, nil) end
  local index = backing
  if missing then
    index = function(_, k)
      local v = backing[k]
      if v == nil then v = missing(k) end
      return v
    end
  end
  local mt = {
    __index = index,
    __newindex = readonly,
    __metatable = shown,
  }
  setmt(t, mt)
  return backing, mt
end

-- setmetatable() on a read-only table fails as Redis's does.
local raw_setmetatable = setmetatable
rawset(_G, 'setmetatable', function(t, mt)
  if backings[t] or t == shown then error('Attempt to modify a readonly table', 0) end
  return raw_setmetatable(t, mt)
end)

-- pairs() walks a read-only table's entries, as on Redis.
local raw_pairs, next = pairs, next
rawset(_G, 'pairs', function(t)
  local b = backings[t]
  if b then return next, b, nil end
  return raw_pairs(t)
end)

for _, name in raw_pairs({'bit', 'cjson', 'cmsgpack', 'coroutine', 'math', 'redis', 'string', 'struct', 'table'}) do
  local lib = _G[name]
  if type(lib) == 'table' then lock(lib) end
end
local function missing_global(k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
end

-- What a library's code sees while FUNCTION LOAD runs it: only a small
-- `redis` table; the functions it registers see the full globals later.
bridge.registered = {}
local function valid_name(name)
  return type(name) == 'string' and #name > 0 and not find(name, '[^%w_]')
end
local known_flags = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}
local loading = false
bridge.impl_register_function = function(...)
  if not loading then return fail('ERR redis.register_function can only be called on FUNCTION LOAD command') end
  local n = select('#', ...)
  local name, callback, flags, description
  if n == 1 and type((...)) == 'table' then
    for k, v in raw_pairs((...)) do
      if k == 'function_name' then
        if type(v) ~= 'string' and type(v) ~= 'number' then
          return fail('ERR function_name argument given to redis.register_function must be a string')
        end
        name = tostring(v)
      elseif k == 'callback' then
        if type(v) ~= 'function' then
          return fail('ERR callback argument given to redis.register_function must be a function')
        end
        callback = v
      elseif k == 'flags' then flags = v
      elseif k == 'description' then description = v
      else return fail('ERR unknown argument given to redis.register_function') end
    end
    if name == nil then return fail('ERR redis.register_function must get a function name argument') end
    if type(callback) ~= 'function' then return fail('ERR redis.register_function must get a callback argument') end
  elseif n == 2 then
    name, callback = ...
    if type(name) ~= 'string' then return fail('ERR first argument to redis.register_function must be a string') end
    if type(callback) ~= 'function' then return fail('ERR second argument to redis.register_function must be a function') end
  elseif n == 1 then
    return fail('ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
  else
    return fail('ERR wrong number of arguments to redis.register_function')
  end
  if not valid_name(name) then
    return fail('ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  local list = {}
  if flags ~= nil then
    if type(flags) ~= 'table' then return fail('ERR flags argument to redis.register_function must be a table representing function flags') end
    for _, f in raw_pairs(flags) do
      if type(f) ~= 'string' or not known_flags[f] then return fail('ERR unknown flag given') end
      list[#list + 1] = f
    end
  end
  if description ~= nil and type(description) ~= 'string' and type(description) ~= 'number' then
    return fail('ERR description argument given to redis.register_function must be a string')
  end
  local reg = bridge.registered
  for _, r in raw_pairs(reg) do
    if lower(r.name) == lower(name) then return fail('ERR Function already exists in the library') end
  end
  reg[#reg + 1] = {name = name, callback = callback, flags = list,
    description = description and tostring(description)}
  return true
end
local load_redis = {
  register_function = bridge.c_register_function, log = redis.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = bridge.version, REDIS_VERSION_NUM = bridge.version_num,
}
lock(load_redis, missing_global)
local load_api = {redis = load_redis}

local run_api, mt = lock(_G, nil)
local current = run_api
rawset(mt, '__index', function(_, k)
  local v = current[k]
  if v == nil then v = missing_global(k) end
  return v
end)
bridge.globals = run_api
-- FUNCTION LOAD: library code runs with the load-time globals.
bridge.loading = function(on)
  current = on and load_api or run_api
  loading = on
  if on then bridge.registered = {} end
end
