//! The load generator's requests: keys and values derived from a key number,
//! SET/GET encoded straight into a write buffer without allocating, so the
//! generator can check what GET returns. Replies are framed by the crate's
//! client (`shardis::client`). Never touches a socket.

use bytes::{BufMut, BytesMut};

/// Writes the decimal form of `n` into `out`, returning the used tail.
pub fn itoa(mut n: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &out[i..]
}

/// Builds keys and values and encodes requests. Values are derived from the key
/// (`<key>xxxx…`, cut to `value_size`) so `--verify` can check what comes back.
pub struct Encoder {
    prefix: Vec<u8>,
    value_size: usize,
    padding: Vec<u8>,
}

impl Encoder {
    pub fn new(prefix: &[u8], value_size: usize) -> Self {
        Encoder {
            prefix: prefix.to_vec(),
            value_size,
            padding: vec![b'x'; value_size],
        }
    }

    /// The key text for key number `n`: prefix followed by the decimal number.
    pub fn key(&self, n: u64, out: &mut Vec<u8>) {
        let mut digits = [0u8; 20];
        out.clear();
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(itoa(n, &mut digits));
    }

    pub fn encode_get(&self, n: u64, scratch: &mut Vec<u8>, buf: &mut BytesMut) {
        self.key(n, scratch);
        buf.put_slice(b"*2\r\n$3\r\nGET\r\n");
        put_bulk(buf, scratch);
    }

    pub fn encode_set(&self, n: u64, scratch: &mut Vec<u8>, buf: &mut BytesMut) {
        self.key(n, scratch);
        buf.put_slice(b"*3\r\n$3\r\nSET\r\n");
        put_bulk(buf, scratch);
        let mut digits = [0u8; 20];
        buf.reserve(self.value_size + 24);
        buf.put_u8(b'$');
        buf.put_slice(itoa(self.value_size as u64, &mut digits));
        buf.put_slice(b"\r\n");
        let head = self.value_head(scratch);
        buf.put_slice(head);
        buf.put_slice(&self.padding[head.len()..]);
        buf.put_slice(b"\r\n");
    }

    /// The part of the value that depends on the key: the key text, cut to
    /// the value size; the rest is `x` padding.
    fn value_head<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        &key[..key.len().min(self.value_size)]
    }

    /// True if `value` is exactly what `encode_set` wrote for the key text `key`.
    pub fn is_expected_value(&self, key: &[u8], value: &[u8]) -> bool {
        if value.len() != self.value_size {
            return false;
        }
        let head = self.value_head(key);
        value[..head.len()] == *head && value[head.len()..].iter().all(|&b| b == b'x')
    }
}

fn put_bulk(buf: &mut BytesMut, data: &[u8]) {
    let mut digits = [0u8; 20];
    buf.put_u8(b'$');
    buf.put_slice(itoa(data.len() as u64, &mut digits));
    buf.put_slice(b"\r\n");
    buf.put_slice(data);
    buf.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_requests_are_well_formed_and_values_verify() {
        let enc = Encoder::new(b"key:", 16);
        let mut scratch = Vec::new();
        let mut buf = BytesMut::new();
        enc.encode_get(42, &mut scratch, &mut buf);
        assert_eq!(&buf[..], b"*2\r\n$3\r\nGET\r\n$6\r\nkey:42\r\n");
        buf.clear();
        enc.encode_set(7, &mut scratch, &mut buf);
        assert_eq!(
            &buf[..],
            b"*3\r\n$3\r\nSET\r\n$5\r\nkey:7\r\n$16\r\nkey:7xxxxxxxxxxx\r\n"
        );
        assert!(enc.is_expected_value(b"key:7", b"key:7xxxxxxxxxxx"));
        assert!(!enc.is_expected_value(b"key:8", b"key:7xxxxxxxxxxx"));
        assert!(!enc.is_expected_value(b"key:7", b"key:7xxxxxxxxxx"));
    }

    #[test]
    fn tiny_values_hold_a_cut_key() {
        let enc = Encoder::new(b"key:", 3);
        let mut scratch = Vec::new();
        let mut buf = BytesMut::new();
        enc.encode_set(123, &mut scratch, &mut buf);
        assert!(buf.ends_with(b"$3\r\nkey\r\n"));
        assert!(enc.is_expected_value(b"key:123", b"key"));
    }

    #[test]
    fn itoa_matches_to_string() {
        for n in [0u64, 7, 10, 99, 12345, u64::MAX] {
            let mut d = [0u8; 20];
            assert_eq!(itoa(n, &mut d), n.to_string().as_bytes());
        }
    }
}
