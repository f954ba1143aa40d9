//! The node's function libraries (Redis 7 functions): loading a
//! library's code, its `#!lua name=…` line, name collisions, and the
//! DUMP payload.
//!
//! The payload is this node's own format, not redis-server's: a magic
//! line, each library's code with its length, and a checksum. FUNCTION
//! DUMP on a built-in node and FUNCTION RESTORE on one round-trip.

use super::engine::{Engine, Registered};
use crate::backend::error::CmdError;
use std::collections::BTreeMap;

/// One loaded library.
pub(crate) struct Library {
    pub(crate) code: Vec<u8>,
    /// Its functions, by name.
    pub(crate) functions: BTreeMap<String, Registered>,
}

/// The Lua state functions run in and the libraries loaded in it.
pub(crate) struct Libraries {
    pub(crate) engine: Engine,
    pub(crate) libs: BTreeMap<String, Library>,
}

const MAGIC: &[u8] = b"SHARDIS-FUNCTIONS-1\n";
const NAME_RULE: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Reads `#!lua name=<name>`: the library name and where the code
/// after that line starts (its newline kept, so line numbers match).
fn metadata(code: &[u8]) -> Result<(String, usize), CmdError> {
    if !code.starts_with(b"#!") {
        return Err(CmdError::err("Missing library metadata"));
    }
    let Some(end) = memchr::memchr(b'\n', code) else {
        return Err(CmdError::err("Invalid library metadata"));
    };
    let line = String::from_utf8_lossy(&code[..end]).into_owned();
    let parts = split_args(&line).ok_or_else(|| CmdError::err("Invalid library metadata"))?;
    let mut parts = parts.iter().map(String::as_str);
    let engine = parts.next().unwrap_or("#!").get(2..).unwrap_or("");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(CmdError::err(format!("Engine '{engine}' not found")));
    }
    let mut name = None;
    for p in parts {
        let prefix = p.get(..5).is_some_and(|x| x.eq_ignore_ascii_case("name="));
        match prefix.then(|| &p[5..]) {
            Some(_) if name.is_some() => {
                return Err(CmdError::err(
                    "Invalid metadata value, name argument was given multiple times",
                ))
            }
            Some(n) => name = Some(n.to_string()),
            None => return Err(CmdError::err(format!("Invalid metadata value given: {p}"))),
        }
    }
    let name = name.ok_or_else(|| CmdError::err("Library name was not given"))?;
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err(CmdError::err(NAME_RULE));
    }
    Ok((name, end))
}

impl Libraries {
    pub(crate) fn new(busy: &std::sync::Arc<super::busy::Busy>) -> Result<Libraries, CmdError> {
        Ok(Libraries {
            engine: Engine::new(busy.clone()).map_err(|e| CmdError::err(format!("Lua: {e}")))?,
            libs: BTreeMap::new(),
        })
    }

    /// The function named `name`, in any library.
    pub(crate) fn find(&self, name: &str) -> Option<&Registered> {
        // Function names are case-insensitive, as in Redis.
        self.libs.values().find_map(|l| {
            l.functions
                .values()
                .find(|f| f.name.eq_ignore_ascii_case(name))
        })
    }

    /// FUNCTION LOAD [REPLACE]: loads `code`, returns the library name.
    pub(crate) fn load(&mut self, code: &[u8], replace: bool) -> Result<String, CmdError> {
        let (name, skip) = metadata(code)?;
        if !replace && self.libs.contains_key(&name) {
            return Err(CmdError::err(format!("Library '{name}' already exists")));
        }
        let registered = self
            .engine
            .load_library(&code[skip..])
            .map_err(CmdError::err)?;
        if registered.is_empty() {
            return Err(CmdError::err("No functions registered"));
        }
        for f in &registered {
            let taken = self.libs.iter().any(|(lib, l)| {
                *lib != name && l.functions.keys().any(|k| k.eq_ignore_ascii_case(&f.name))
            });
            if taken {
                return Err(CmdError::err(format!("Function {} already exists", f.name)));
            }
        }
        let functions = registered
            .into_iter()
            .map(|f| (f.name.clone(), f))
            .collect();
        self.libs.insert(
            name.clone(),
            Library {
                code: code.to_vec(),
                functions,
            },
        );
        Ok(name)
    }

    /// FUNCTION DUMP's payload.
    pub(crate) fn dump(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for lib in self.libs.values() {
            out.extend_from_slice(&(lib.code.len() as u64).to_le_bytes());
            out.extend_from_slice(&lib.code);
        }
        let sum = checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }
}

/// Reads a DUMP payload back into each library's code.
pub(crate) fn undump(payload: &[u8]) -> Result<Vec<Vec<u8>>, CmdError> {
    let bad = || CmdError::BadPayload;
    if payload.len() < MAGIC.len() + 8 || !payload.starts_with(MAGIC) {
        return Err(bad());
    }
    let (body, sum) = payload.split_at(payload.len() - 8);
    if checksum(body).to_le_bytes() != sum {
        return Err(bad());
    }
    let mut rest = &body[MAGIC.len()..];
    let mut codes = Vec::new();
    while !rest.is_empty() {
        let len = rest.get(..8).ok_or_else(bad)?;
        let len = u64::from_le_bytes(len.try_into().map_err(|_| bad())?) as usize;
        let code = rest.get(8..8usize.saturating_add(len)).ok_or_else(bad)?;
        codes.push(code.to_vec());
        rest = &rest[8 + len..];
    }
    Ok(codes)
}

/// The words of a metadata line as Redis's `sdssplitargs` reads them:
/// split at whitespace, `"…"` (with backslash escapes) and `'…'` quoting
/// within a word; `None` for unbalanced quotes or a closing quote not
/// followed by whitespace.
fn split_args(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(words);
        }
        let mut word = String::new();
        while let Some(c) = chars.next() {
            match c {
                c if c.is_whitespace() => break,
                '"' | '\'' => {
                    loop {
                        match chars.next()? {
                            '\\' if c == '"' => word.push(match chars.next()? {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                'a' => '\x07',
                                'b' => '\x08',
                                e => e,
                            }),
                            '\\' if chars.peek() == Some(&'\'') => {
                                chars.next();
                                word.push('\'');
                            }
                            q if q == c => break,
                            x => word.push(x),
                        }
                    }
                    if chars.peek().is_some_and(|n| !n.is_whitespace()) {
                        return None;
                    }
                }
                c => word.push(c),
            }
        }
        words.push(word);
    }
}

/// The library name in a library's code, for RESTORE's collision checks.
pub(crate) fn name_of(code: &[u8]) -> Result<String, CmdError> {
    metadata(code).map(|(name, _)| name)
}

/// FNV-1a, 64 bits.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_lines_are_read_as_redis_reads_them() {
        assert_eq!(metadata(b"#!lua name=lib\nx").unwrap(), ("lib".into(), 14));
        assert_eq!(metadata(b"#!lua  name=l2 \nx").unwrap().0, "l2");
        let err = |c: &[u8]| metadata(c).unwrap_err().to_string();
        assert_eq!(err(b"return 1"), "ERR Missing library metadata");
        assert_eq!(err(b"#!lua\nx"), "ERR Library name was not given");
        assert_eq!(err(b"#!js name=x\n"), "ERR Engine 'js' not found");
        assert_eq!(
            err(b"#!lua foo=bar\n"),
            "ERR Invalid metadata value given: foo=bar"
        );
        assert_eq!(err(b"#!lua name=a-b\n"), format!("ERR {NAME_RULE}"));
        assert_eq!(err(b"#! name=test\n"), "ERR Engine '' not found");
        assert_eq!(metadata(b"#!lua name=\"foo\"\nx").unwrap().0, "foo");
        assert_eq!(metadata(b"#!LUA NAME=x\n").unwrap().0, "x");
        assert_eq!(err(b"#!lua name=\"foo\n"), "ERR Invalid library metadata");
    }

    #[test]
    fn payloads_round_trip_and_refuse_damage() {
        let mut p = MAGIC.to_vec();
        for code in [&b"#!lua name=a\n"[..], b"#!lua name=b\nreturn"] {
            p.extend_from_slice(&(code.len() as u64).to_le_bytes());
            p.extend_from_slice(code);
        }
        let sum = checksum(&p);
        p.extend_from_slice(&sum.to_le_bytes());
        assert_eq!(undump(&p).unwrap().len(), 2);
        let mut bad = p.clone();
        bad[MAGIC.len() + 9] ^= 1;
        assert!(undump(&bad).is_err());
        assert!(undump(b"garbage").is_err());
        assert!(undump(&p[..p.len() - 1]).is_err());
    }
}
