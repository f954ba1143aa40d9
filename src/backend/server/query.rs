//! A client's query buffer: the bytes read from its socket, decoded one
//! request at a time in place.
//!
//! The server loop reads into [`Query::buf`], executes each complete request
//! [`Query::next`] finds (its arguments are slices of the buffer) and then
//! consumes it. Decoding keeps its place between reads: a request arriving
//! in many reads is scanned once in all, not once per read (a 100 000
//! argument MSET in 4 KB reads cost 120 times a 10 000 argument one when
//! every read started over from the first argument). Owns no socket;
//! `bench.rs` drives it the same way.

use crate::resp::request::{next_frame_from, Progress};
use crate::resp::{Frame, Limits, ProtocolError, Spans};
use bytes::{Buf, BytesMut};
use smallvec::SmallVec;

/// Initial size of a client's query and reply buffers.
pub(crate) const BUFFER_BYTES: usize = 16 * 1024;

/// The arguments of one request, borrowed from the query buffer.
pub(crate) type Args<'a> = SmallVec<[&'a [u8]; 8]>;

/// One client's unexecuted input.
pub(crate) struct Query {
    /// What was read and not yet consumed.
    pub(crate) buf: BytesMut,
    /// The arguments of the request at the front, as spans of `buf`: of an
    /// incomplete one, those parsed so far.
    spans: Spans,
    /// How far the incomplete request at the front was parsed.
    progress: Progress,
}

impl Query {
    pub(crate) fn with_capacity(bytes: usize) -> Query {
        Query {
            buf: BytesMut::with_capacity(bytes),
            spans: Spans::new(),
            progress: Progress::default(),
        }
    }

    /// The request at the front, not consumed: `Ok(None)` until it has all
    /// arrived. Resumes where the previous call stopped.
    pub(crate) fn next(&mut self, limits: &Limits) -> Result<Option<Frame>, ProtocolError> {
        next_frame_from(&self.buf, limits, &mut self.spans, &mut self.progress)
    }

    /// The arguments of `frame`, the request [`Query::next`] just returned.
    pub(crate) fn args<'a>(&'a self, frame: &'a Frame) -> Args<'a> {
        match frame {
            Frame::Spans { .. } => self.spans.iter().map(|&(s, e)| &self.buf[s..e]).collect(),
            Frame::Inline { args, .. } => args.iter().map(|a| a.as_slice()).collect(),
        }
    }

    /// Drops `frame` from the front once it has run.
    pub(crate) fn consume(&mut self, frame: &Frame) {
        let len = match frame {
            Frame::Spans { len } | Frame::Inline { len, .. } => *len,
        };
        self.buf.advance(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request's arguments, fed `step` bytes per read.
    fn decode_in_pieces(input: &[u8], step: usize) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut q = Query::with_capacity(16);
        let mut all = Vec::new();
        for piece in input.chunks(step) {
            q.buf.extend_from_slice(piece);
            while let Some(frame) = q.next(&Limits::default())? {
                let args = q.args(&frame);
                if !args.is_empty() {
                    all.push(args.iter().map(|a| a.to_vec()).collect());
                }
                drop(args);
                q.consume(&frame);
            }
        }
        Ok(all)
    }

    #[test]
    fn a_request_cut_anywhere_decodes_as_when_whole() {
        let input: &[u8] =
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n\r\n*0\r\nPING  \"a b\"\r\n\
            *0\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let whole = decode_in_pieces(input, input.len()).unwrap();
        assert_eq!(whole.len(), 3);
        for step in 1..input.len() {
            assert_eq!(decode_in_pieces(input, step).unwrap(), whole, "step {step}");
        }
    }

    #[test]
    fn a_bad_request_is_an_error_however_it_arrives() {
        let input: &[u8] = b"*2\r\n$3\r\nGET\r\n:1\r\n";
        for step in 1..=input.len() {
            assert!(decode_in_pieces(input, step).is_err(), "step {step}");
        }
    }
}
