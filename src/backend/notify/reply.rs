//! Just enough of a RESP reader to tell what a command's reply says about
//! its effect: an error, a null, an integer, an array's items. Reads the
//! node's own replies, so a malformed one only means "no events".

/// One reply, or one item of an array reply.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reply<'a> {
    Error,
    Null,
    Int(i64),
    Bulk(&'a [u8]),
    Status(&'a [u8]),
    /// An array, set or map: its items' bytes, and how many items.
    Array(&'a [u8], usize),
    /// A double or anything else.
    Other,
}

impl<'a> Reply<'a> {
    /// The first reply in `buf` (the command's whole reply).
    pub(crate) fn parse(buf: &'a [u8]) -> Reply<'a> {
        item(buf).map_or(Reply::Other, |(r, _)| r)
    }

    pub(crate) fn is_error(&self) -> bool {
        matches!(self, Reply::Error)
    }

    /// Neither an error nor a null nor an empty array.
    pub(crate) fn is_some(&self) -> bool {
        !matches!(self, Reply::Error | Reply::Null | Reply::Array(_, 0))
    }

    /// An integer reply's value; 0 otherwise.
    pub(crate) fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            _ => 0,
        }
    }

    /// An array reply's items.
    pub(crate) fn items(&self) -> Vec<Reply<'a>> {
        let Reply::Array(mut b, n) = *self else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let Some((r, used)) = item(b) else { break };
            out.push(r);
            b = &b[used..];
        }
        out
    }
}

/// The line after the type byte and the bytes up to the end of its CRLF.
fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some((&buf[1..end], end + 2))
}

fn item(buf: &[u8]) -> Option<(Reply<'_>, usize)> {
    let (head, used) = line(buf)?;
    let num = || std::str::from_utf8(head).ok()?.parse::<i64>().ok();
    Some(match buf[0] {
        b'-' | b'!' => (Reply::Error, used),
        b'_' => (Reply::Null, used),
        b'+' => (Reply::Status(head), used),
        b':' => (Reply::Int(num()?), used),
        b'$' => match num()? {
            n if n < 0 => (Reply::Null, used),
            n => {
                let n = n as usize;
                let body = buf.get(used..used + n)?;
                (Reply::Bulk(body), used + n + 2)
            }
        },
        b'*' | b'~' | b'%' | b'>' => match num()? {
            n if n < 0 => (Reply::Null, used),
            n => {
                let n = if buf[0] == b'%' { 2 * n } else { n } as usize;
                let mut at = used;
                for _ in 0..n {
                    at += item(&buf[at..])?.1;
                }
                (Reply::Array(&buf[used..at], n), at)
            }
        },
        _ => (Reply::Other, used),
    })
}

#[cfg(test)]
mod tests {
    use super::Reply;

    #[test]
    fn replies_are_read_as_their_effect() {
        assert_eq!(Reply::parse(b":3\r\n").int(), 3);
        assert!(Reply::parse(b"-ERR x\r\n").is_error());
        assert!(!Reply::parse(b"$-1\r\n").is_some());
        assert!(!Reply::parse(b"*0\r\n").is_some());
        let r = Reply::parse(b"*2\r\n$1\r\nk\r\n*1\r\n$1\r\na\r\n");
        let items = r.items();
        assert_eq!(items[0], Reply::Bulk(b"k"));
        assert_eq!(items[1].items(), vec![Reply::Bulk(b"a")]);
    }
}
