//! `-Z`: zero-copy send.
//!
//! Linux offers three ways to send without copying from user memory: `sendfile` from a file (here a
//! sealed memfd holding the payload), `splice` from a pipe the payload was `tee`d into, and
//! `send(MSG_ZEROCOPY)` with completion notifications. Which is fastest depends on the NIC and the path;
//! [`DEFAULT_METHOD`] is the one that measured fastest on loopback (docs/test.md, "Zero-copy"), and
//! `LONGHAUL_ZEROCOPY_METHOD=sendfile|splice|msg_zerocopy` in the sending process picks another, for
//! measuring on real hardware. The payload never changes during a test, so no method has to wait for the
//! kernel to release pages before reusing them.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use longhaul_sys::{SendfileSource, SpliceSource, ZeroCopySender};

use crate::EngineError;
use crate::payload::{self, AlignedBuf};

/// The zero-copy methods implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroCopyMethod {
    /// `sendfile(2)` from a memfd.
    Sendfile,
    /// `tee(2)` + `splice(2)` from a pipe.
    Splice,
    /// `send(2)` with `MSG_ZEROCOPY`.
    MsgZerocopy,
}

impl ZeroCopyMethod {
    /// The method's name, as reports show it.
    pub fn name(self) -> &'static str {
        match self {
            ZeroCopyMethod::Sendfile => "sendfile",
            ZeroCopyMethod::Splice => "splice",
            ZeroCopyMethod::MsgZerocopy => "msg_zerocopy",
        }
    }

    /// The method this process uses: `LONGHAUL_ZEROCOPY_METHOD` if set and valid, else the default.
    pub fn selected() -> Self {
        match std::env::var("LONGHAUL_ZEROCOPY_METHOD").as_deref() {
            Ok("sendfile") => ZeroCopyMethod::Sendfile,
            Ok("splice") => ZeroCopyMethod::Splice,
            Ok("msg_zerocopy") => ZeroCopyMethod::MsgZerocopy,
            _ => DEFAULT_METHOD,
        }
    }
}

/// The method `-Z` uses unless overridden: the fastest one measured (see the module docs).
pub const DEFAULT_METHOD: ZeroCopyMethod = ZeroCopyMethod::Sendfile;

/// The payload, prepared for zero-copy sending, shared by a test's senders.
pub(crate) struct ZeroCopySource {
    method: ZeroCopyMethod,
    payload: Arc<AlignedBuf>,
    file: Option<SendfileSource>,
}

impl ZeroCopySource {
    fn new(payload: Arc<AlignedBuf>) -> Result<Self, EngineError> {
        let method = ZeroCopyMethod::selected();
        let file = match method {
            ZeroCopyMethod::Sendfile => Some(SendfileSource::new(payload.as_slice())?),
            _ => None,
        };
        Ok(Self {
            method,
            payload,
            file,
        })
    }

    /// The payload itself (an encrypted stream sends it by copy).
    pub(crate) fn payload(&self) -> Arc<AlignedBuf> {
        Arc::clone(&self.payload)
    }

    /// A per-stream sender.
    pub(crate) fn sender(&self, sock: BorrowedFd<'_>) -> io::Result<StreamSender<'_>> {
        Ok(match (self.method, &self.file) {
            (ZeroCopyMethod::Sendfile, Some(f)) => StreamSender::File(f),
            (ZeroCopyMethod::Splice, _) => {
                StreamSender::Pipe(SpliceSource::new(self.payload.as_slice())?)
            }
            _ => StreamSender::Msg(ZeroCopySender::new(sock)?, self.payload.as_slice()),
        })
    }
}

/// How a sender puts bytes on the wire.
#[derive(Clone)]
pub(crate) enum SendMethod {
    /// Plain `write` from a user buffer.
    Copy(Arc<AlignedBuf>),
    /// `-Z`: the kernel's zero-copy path (this module).
    ZeroCopy(Arc<ZeroCopySource>),
}

/// One stream's zero-copy sender.
pub(crate) enum StreamSender<'a> {
    File(&'a SendfileSource),
    Pipe(SpliceSource),
    Msg(ZeroCopySender, &'a [u8]),
}

impl StreamSender<'_> {
    /// Sends up to `len` payload bytes.
    pub(crate) fn send(&mut self, sock: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        Ok(match self {
            StreamSender::File(f) => f.send(sock, len)?,
            StreamSender::Pipe(p) => p.send(sock, len)?,
            StreamSender::Msg(z, payload) => z.send(sock, &payload[..len.min(payload.len())])?,
        })
    }
}

/// The send method for a test: plain copies, or zero-copy with `-Z`.
pub(crate) fn method(
    zerocopy: bool,
    write_len: usize,
    repeating: bool,
) -> Result<SendMethod, EngineError> {
    let payload = payload::payload(write_len, repeating)?;
    Ok(if zerocopy {
        SendMethod::ZeroCopy(Arc::new(ZeroCopySource::new(payload)?))
    } else {
        SendMethod::Copy(payload)
    })
}
