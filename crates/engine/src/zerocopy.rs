//! `-Z`: zero-copy send.
//!
//! Linux offers three ways to send without copying from user memory: `sendfile` from a file (here a
//! memfd holding the payload), `splice` from a pipe, and `send(MSG_ZEROCOPY)` with completion
//! notifications. Which is fastest depends on the NIC and path; `bench/zerocopy.md` records the loopback
//! measurement that chose [`METHOD`]. The payload never changes during a test, so no method has to wait
//! for the kernel to release pages before reusing them.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use longhaul_sys::{SendfileSource, ZeroCopySender};

use crate::stream::{AlignedBuf, SendMethod};
use crate::EngineError;

/// The zero-copy methods implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroCopyMethod {
    /// `sendfile(2)` from a memfd.
    Sendfile,
    /// `send(2)` with `MSG_ZEROCOPY`.
    MsgZerocopy,
}

/// The method `-Z` uses: the fastest one measured (see the module docs).
pub const METHOD: ZeroCopyMethod = ZeroCopyMethod::Sendfile;
/// Its name, as reports show it.
pub const METHOD_NAME: &str = match METHOD {
    ZeroCopyMethod::Sendfile => "sendfile",
    ZeroCopyMethod::MsgZerocopy => "msg_zerocopy",
};

/// The payload, prepared for zero-copy sending, shared by a test's senders.
pub(crate) struct ZeroCopySource {
    payload: Arc<AlignedBuf>,
    file: Option<SendfileSource>,
}

impl ZeroCopySource {
    fn new(payload: Arc<AlignedBuf>) -> Result<Self, EngineError> {
        let file = match METHOD {
            ZeroCopyMethod::Sendfile => Some(SendfileSource::new(payload.as_slice())?),
            ZeroCopyMethod::MsgZerocopy => None,
        };
        Ok(Self { payload, file })
    }

    /// A per-stream sender.
    pub(crate) fn sender(&self, sock: BorrowedFd<'_>) -> io::Result<StreamSender<'_>> {
        Ok(match &self.file {
            Some(f) => StreamSender::File(f),
            None => StreamSender::Msg(ZeroCopySender::new(sock)?, self.payload.as_slice()),
        })
    }
}

/// One stream's zero-copy sender.
pub(crate) enum StreamSender<'a> {
    File(&'a SendfileSource),
    Msg(ZeroCopySender, &'a [u8]),
}

impl StreamSender<'_> {
    /// Sends up to `len` payload bytes.
    pub(crate) fn send(&mut self, sock: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        Ok(match self {
            StreamSender::File(f) => f.send(sock, len)?,
            StreamSender::Msg(z, payload) => z.send(sock, &payload[..len.min(payload.len())])?,
        })
    }
}

/// The send method for a test: plain copies, or zero-copy with `-Z`.
pub(crate) fn method(zerocopy: bool, write_len: usize) -> Result<SendMethod, EngineError> {
    let payload = crate::stream::payload(write_len);
    Ok(if zerocopy {
        SendMethod::ZeroCopy(Arc::new(ZeroCopySource::new(payload)?))
    } else {
        SendMethod::Copy(payload)
    })
}
